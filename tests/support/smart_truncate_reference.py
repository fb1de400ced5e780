"""The smart truncation of commit 9b6c383, kept verbatim as the oracle of the equivalence tests
(tests/compaction/test_smart_truncate_equivalence.py): the faster `compaction.smart_truncate`
must give the same result, message for message and figure for figure.

Smart truncation, the LLM-free fallback (docs/behaviour.md#smart-truncation).

1. The middle is the span of messages that start between `middle_start` and `middle_end`
   (1/6 and 5/6) of the cumulative tiktoken count, as message indexes.
2. In the middle, tool calls are removed with their results, except file views (a kept
   file view keeps its pair). Text stays; a message left with nothing substantive goes.
3. Every file-view result, in the middle or not, is replaced by its folded outline when
   that is smaller (line-number prefixes stripped first, see `file_views`).
4. If the count, scaled by `policy.safety_factor`, is still over `smart_truncate_max_tokens`,
   whole messages are deleted from the centre of the middle outward: batch size = tokens to
   remove / average tokens of a middle message, taken in one pass, never at random. A tool
   call and its result are deleted together or not at all.

Kept verbatim, never filtered, folded or deleted: the leading system messages, the first
and the last message after them, and any message holding a `<command>` block (active
workflows; `<command-name>` and `<command ...>` tags count too). A system message in the
middle of the conversation is ordinary content. Same-role neighbours left by removed
messages are merged (`compaction.alternation`), so an alternating input stays alternating.
The result is a valid request with no more tokens than the input; `detail` lists what was
done, with input indexes so originals can be found (`merged_indexes`: messages merged into
the kept message before them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from compaction.alternation import merge_groups, merge_run
from compaction.file_views import file_view_path, strip_line_numbers
from compaction.folding import SourceFile, fold
from compaction.messages import Block, Message, blocks_of, message_text, tool_result_text
from compaction.partition import leading_system_count
from compaction.policy import Policy
from compaction.results import TruncateResult
from compaction.tokens import message_token_counts
from compaction.toolpairs import ToolBlock, rebuild_message, tool_blocks
from compaction.validation import ensure_valid

__all__ = ["has_command_block", "middle_span", "smart_truncate"]

_COMMAND: Final = re.compile(r"<command[\s>-]")


def has_command_block(message: Mapping[str, Any]) -> bool:
    """True when a message's text holds a `<command>` block (an active workflow)."""
    return bool(_COMMAND.search(message_text(message)))


def middle_span(counts: Sequence[int], start: float = 1 / 6, end: float = 5 / 6) -> tuple[int, int]:
    """`(lo, hi)`: the messages whose first token lies in [start, end) of the total count.

    `lo == hi` when no message starts there.
    """
    total = sum(counts)
    low, high = total * start, total * end
    inside: list[int] = []
    before = 0
    for index, count in enumerate(counts):
        if low <= before < high:
            inside.append(index)
        before += count
    if not inside:
        return 0, 0
    return inside[0], inside[-1] + 1


def smart_truncate(messages: Sequence[Message], policy: Policy | None = None) -> TruncateResult:
    """Thin the middle, fold file views and delete from the centre out (module doc).

    Raises InvalidMessagesError for a history that is not a valid request. The input is
    never modified; untouched messages keep their identity.
    """
    policy = policy or Policy()
    ensure_valid(messages)
    original = list(messages)
    counts = message_token_counts(original, policy.encoding)
    work = _Work(original, counts, policy)
    work.filter_middle_tools()
    work.fold_file_views()
    work.recount()
    work.delete_from_centre()
    return work.result()


@dataclass(frozen=True)
class _Fold:
    """A file-view result and its folded outline, applied only if that is smaller."""

    index: int
    tool_id: str
    path: str
    result: Block
    text: str
    tokens: int

    def replace(self, item: Block) -> Block:
        if item is self.result:
            return {**item, "content": self.text}
        return item


@dataclass
class _Work:
    """The truncation in progress: replacements by input index (None = removed)."""

    original: list[Message]
    counts: list[int]
    policy: Policy
    current: dict[int, Message | None] = field(default_factory=dict)
    new_counts: dict[int, int] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lo, hi = middle_span(self.counts, self.policy.middle_start, self.policy.middle_end)
        self.protected = _protected_indexes(self.original)
        self.middle = [i for i in range(lo, hi) if i not in self.protected]
        self.detail.update(
            middle=[lo, hi],
            removed_tool_calls=0,
            removed_tool_results=0,
            folded_results=0,
            folded_paths=[],
            deleted_messages=0,
            deleted_indexes=[],
            emptied_indexes=[],
            batch_size=0,
        )

    def message(self, index: int) -> Message | None:
        return self.current.get(index, self.original[index])

    # Step 2: tool calls in the middle ---------------------------------------------------

    def filter_middle_tools(self) -> None:
        middle = set(self.middle)
        tools = self.policy.file_view_tools
        for block in tool_blocks(self.original):
            if block.call_index not in middle or block.result_index in self.protected:
                continue
            call = self.original[block.call_index]
            removed = {
                str(b.get("id"))
                for b in blocks_of(call)
                if b.get("type") == "tool_use" and file_view_path(b, tools) is None
            }
            if removed:
                self._remove_calls(block, removed)

    def _remove_calls(self, block: ToolBlock, removed: set[str]) -> None:
        def without_calls(item: Block) -> Block | None:
            gone = item.get("type") == "tool_use" and str(item.get("id")) in removed
            return None if gone else item

        def without_results(item: Block) -> Block | None:
            gone = item.get("type") == "tool_result" and str(item.get("tool_use_id")) in removed
            return None if gone else item

        for index, replace in (
            (block.call_index, without_calls),
            (block.result_index, without_results),
        ):
            message = self.message(index)
            if message is not None:
                self.current[index] = rebuild_message(message, replace)
        self.detail["removed_tool_calls"] += len(removed)
        self.detail["removed_tool_results"] += len(removed)

    # Step 3: fold file views ------------------------------------------------------------

    def fold_file_views(self) -> None:
        candidates: list[_Fold] = []
        tools = self.policy.file_view_tools
        for block in tool_blocks(self.original):
            if {block.call_index, block.result_index} & self.protected:
                continue
            call = self.message(block.call_index)
            if call is None:
                continue
            for item in blocks_of(call):
                path = file_view_path(item, tools)
                if path is not None:
                    folded = self._fold_result(block.result_index, str(item.get("id")), path)
                    if folded is not None:
                        candidates.append(folded)
        self._apply_smaller_folds(candidates)

    def _fold_result(self, index: int, tool_id: str, path: str) -> _Fold | None:
        result = _find_result(self.message(index), tool_id)
        if result is None or result.get("is_error"):
            return None
        source, first_line = strip_line_numbers(tool_result_text(result.get("content")))
        if not source.strip():
            return None
        folded = fold([SourceFile(path, source, first_line)], policy=self.policy)
        return _Fold(index, tool_id, path, result, folded.text, folded.tokens)

    def _apply_smaller_folds(self, candidates: list[_Fold]) -> None:
        # A result alone in its message has that message's count: no second encode of it.
        alone = [self.original[c.index].get("content") == [c.result] for c in candidates]
        recount = [c for c, known in zip(candidates, alone, strict=True) if not known]
        originals: list[Message] = [{"role": "user", "content": [c.result]} for c in recount]
        counted = iter(message_token_counts(originals, self.policy.encoding))
        before = [
            self.counts[c.index] if known else next(counted)
            for c, known in zip(candidates, alone, strict=True)
        ]
        for candidate, old_tokens in zip(candidates, before, strict=True):
            message = self.message(candidate.index)
            if candidate.tokens >= old_tokens or message is None:
                continue
            self.current[candidate.index] = rebuild_message(message, candidate.replace)
            self.detail["folded_results"] += 1
            self.detail["folded_paths"].append(candidate.path)

    # Step 4: delete from the centre -----------------------------------------------------

    def recount(self) -> None:
        changed = {i: m for i, m in self.current.items() if m is not None}
        recounted = message_token_counts(list(changed.values()), self.policy.encoding)
        self.new_counts = dict(zip(changed, recounted, strict=True))
        self.detail["tokens_after_filter"] = self.tokens()

    def count_of(self, index: int) -> int:
        if index in self.current:
            return 0 if self.current[index] is None else self.new_counts[index]
        return self.counts[index]

    def tokens(self) -> int:
        return sum(self.count_of(i) for i in range(len(self.original)))

    def delete_from_centre(self) -> None:
        tokens = self.tokens()
        if self.policy.scaled(tokens) <= self.policy.smart_truncate_max_tokens:
            return
        alive = [i for i in self.middle if self.message(i) is not None]
        if not alive:
            return
        target = math.floor(self.policy.smart_truncate_max_tokens / self.policy.safety_factor)
        average = max(sum(self.count_of(i) for i in alive) / len(alive), 1.0)
        batch = math.ceil((tokens - target) / average)
        self.detail["batch_size"] = batch
        deleted = _centre_out(self._units(alive), batch)
        for index in sorted(deleted):
            self.current[index] = None
        self.detail["deleted_indexes"] = sorted(deleted)
        self.detail["deleted_messages"] = len(deleted)

    def _units(self, alive: list[int]) -> list[tuple[int, ...]]:
        """Alive middle messages grouped so a tool call and its result stay together.

        A unit that reaches outside the middle or holds a protected message is kept out."""
        middle = set(alive)
        units: list[tuple[int, ...]] = []
        skip: set[int] = set()
        for position, index in enumerate(alive):
            if index in skip:
                continue
            message = self.message(index)
            if message is None:
                continue
            answers = _has_type(message, "tool_result")
            calls = _has_type(message, "tool_use")
            if answers:
                continue  # its call is not in the middle, else it would be in the call's unit
            if calls:
                following = alive[position + 1] if position + 1 < len(alive) else None
                if following != index + 1 or following not in middle:
                    continue  # the result is outside the middle: the pair stays whole
                skip.add(following)
                units.append((index, following))
            else:
                units.append((index,))
        return units

    # Result -----------------------------------------------------------------------------

    def result(self) -> TruncateResult:
        sources = [i for i in range(len(self.original)) if self.message(i) is not None]
        kept = [m for i in sources if (m := self.message(i)) is not None]
        groups = merge_groups(kept, sources)
        messages = [merge_run([kept[n] for n in group]) for group in groups]
        merged = [sources[n] for group in groups for n in group[1:]]
        self.detail["merged_indexes"] = merged
        removed = [i for i, m in self.current.items() if m is None]
        deleted = set(self.detail["deleted_indexes"])
        self.detail["emptied_indexes"] = sorted(i for i in removed if i not in deleted)
        changed = {
            i for i, m in self.current.items() if m is not None and m is not self.original[i]
        }
        changed |= {sources[group[0]] for group in groups if len(group) > 1}
        self.detail["changed_indexes"] = sorted(changed - set(merged))
        tokens_before = sum(self.counts)
        return TruncateResult(
            messages=messages,
            truncated=len(messages) != len(self.original) or bool(self.detail["changed_indexes"]),
            tokens_before=tokens_before,
            tokens_after=self.tokens(),
            removed_message_count=len(removed),
            detail=self.detail,
        )


def _protected_indexes(messages: Sequence[Message]) -> set[int]:
    """Leading system messages, the first and last message after them, `<command>` messages."""
    head_end = leading_system_count(messages)
    protected = set(range(head_end))
    if head_end < len(messages):
        protected.update({head_end, len(messages) - 1})
    protected.update(i for i, m in enumerate(messages) if has_command_block(m))
    return protected


def _centre_out(units: list[tuple[int, ...]], batch: int) -> set[int]:
    """Whole units, from the centre one outward (right, then left, alternately), until at
    least `batch` messages are taken or the units run out."""
    deleted: set[int] = set()
    if not units or batch <= 0:
        return deleted
    centre = len(units) // 2
    order = [centre]
    for step in range(1, len(units)):
        for position in (centre + step, centre - step):
            if 0 <= position < len(units):
                order.append(position)
    for position in order:
        if len(deleted) >= batch:
            break
        deleted.update(units[position])
    return deleted


def _has_type(message: Mapping[str, Any], kind: str) -> bool:
    return any(block.get("type") == kind for block in blocks_of(message))


def _find_result(message: Mapping[str, Any] | None, tool_id: str) -> Block | None:
    if message is None:
        return None
    for block in blocks_of(message):
        if block.get("type") == "tool_result" and str(block.get("tool_use_id")) == tool_id:
            return block
    return None
