"""Smart truncation, the LLM-free fallback (docs/behaviour.md#smart-truncation).

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

Costs: each distinct text is encoded once and a rebuilt message is counted from its blocks
(`block_counts`), so only folded outlines are new text; a view seen again (same path, same
text) reuses its fold, and a file content is parsed once (the outline cache). The views
outside the middle are folded first; when the messages other than the middle's are then
over the limit, and over the target by at least the middle's message count, step 4 deletes
every deletable middle message whatever its views fold to (`doomed_whatever_the_folds`), so
those views are not folded: the output is the same, and `detail` says so
(`deleted_whole_middle`); its `folded_results` and `folded_paths` then count the folds made,
and `tokens_after_filter` and `batch_size` come from the counts with those views unfolded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .alternation import merge_groups, merge_run
from .block_counts import BlockCounts
from .file_views import file_view_path, strip_line_numbers
from .folding import SourceFile, fold
from .messages import Block, Message, blocks_of, message_text, tool_result_text
from .partition import leading_system_count
from .policy import Policy
from .results import TruncateResult
from .toolpairs import ToolBlock, rebuild_message, tool_blocks
from .validation import ensure_valid

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


def smart_truncate(
    messages: Sequence[Message],
    policy: Policy | None = None,
    *,
    token_counts: Sequence[int] | None = None,
) -> TruncateResult:
    """Thin the middle, fold file views and delete from the centre out (module doc).

    `token_counts` (one per message, e.g. cached with a stored session) spares encoding the
    messages again: only the blocks of the messages this rebuilds and the folded outlines
    are counted. Raises InvalidMessagesError for a history that is not a valid request,
    ValueError when `token_counts` does not hold one count per message. The input is never
    modified; untouched messages keep their identity.
    """
    policy = policy or Policy()
    ensure_valid(messages)
    original = list(messages)
    meter = BlockCounts(policy.encoding)
    if token_counts is None:
        counts = meter.count_messages(original)
    else:
        counts = list(token_counts)
        if len(counts) != len(original):
            raise ValueError("token_counts must hold one count per message")
    work = _Work(original, counts, policy, meter)
    work.filter_middle_tools()
    middle = set(work.middle)
    work.fold_file_views(lambda index: index not in middle)
    doomed = work.doomed_whatever_the_folds()
    work.detail["deleted_whole_middle"] = bool(doomed)
    work.fold_file_views(lambda index: index in middle and index not in doomed)
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
    meter: BlockCounts
    current: dict[int, Message | None] = field(default_factory=dict)
    new_counts: dict[int, int] = field(default_factory=dict)
    filtered_tokens: int = 0  # after steps 2 and 3
    folded: list[tuple[int, str]] = field(default_factory=list)  # (input index, path)
    deleted_tokens: int = 0  # of the messages step 4 deletes
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lo, hi = middle_span(self.counts, self.policy.middle_start, self.policy.middle_end)
        self.protected = _protected_indexes(self.original)
        self.tool_blocks = tool_blocks(self.original)
        self.folds: dict[tuple[str, str], tuple[str, int] | None] = {}
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
        for block in self.tool_blocks:
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

    def fold_file_views(self, chosen: Callable[[int], bool]) -> None:
        """Fold the views whose result is in a message `chosen` (by input index) takes."""
        candidates: list[_Fold] = []
        tools = self.policy.file_view_tools
        for block in self.tool_blocks:
            if {block.call_index, block.result_index} & self.protected:
                continue
            if not chosen(block.result_index):
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
        text = tool_result_text(result.get("content"))
        key = (path, text)
        if key not in self.folds:  # the same view again (path and text): folded once
            source, first_line = strip_line_numbers(text)
            if source.strip():
                folded = fold([SourceFile(path, source, first_line)], policy=self.policy)
                self.folds[key] = (folded.text, folded.tokens)
            else:
                self.folds[key] = None
        found = self.folds[key]
        if found is None:
            return None
        return _Fold(index, tool_id, path, result, found[0], found[1])

    def _apply_smaller_folds(self, candidates: list[_Fold]) -> None:
        for candidate in candidates:
            content = self.original[candidate.index].get("content")
            if isinstance(content, list) and len(content) == 1 and content[0] is candidate.result:
                old_tokens = self.counts[candidate.index]  # alone: its message's count
            else:
                old_tokens = self.meter.block(candidate.result)
            message = self.message(candidate.index)
            if candidate.tokens >= old_tokens or message is None:
                continue
            self.current[candidate.index] = rebuild_message(message, candidate.replace)
            self.folded.append((candidate.index, candidate.path))
        self.folded.sort(key=lambda fold: fold[0])  # stable: a message's views in block order
        self.detail["folded_results"] = len(self.folded)
        self.detail["folded_paths"] = [path for _, path in self.folded]

    def doomed_whatever_the_folds(self) -> set[int]:
        """The middle messages step 4 deletes whatever their views fold to, with every other
        message counted as it stands (the views outside the middle folded): all the deletable
        units, when those other messages are over the limit and over the target by at least
        the alive middle's message count. Else the empty set.

        Proof: with S the alive middle's tokens after its folds (any S >= 0), the total is
        over the limit, and the batch, (outside + S - target) / max(S / n, 1), is at least n,
        so every unit goes (`_centre_out`); units depend on the messages' blocks, which
        folding does not change."""
        alive = [i for i in self.middle if self.message(i) is not None]
        if not alive:
            return set()
        inside = set(alive)
        outside = sum(self._tokens_now(i) for i in range(len(self.original)) if i not in inside)
        target = math.floor(self.policy.smart_truncate_max_tokens / self.policy.safety_factor)
        if self.policy.scaled(outside) <= self.policy.smart_truncate_max_tokens:
            return set()
        if outside - target < len(alive):
            return set()
        return {index for unit in self._units(alive) for index in unit}

    def _tokens_now(self, index: int) -> int:
        if index not in self.current:
            return self.counts[index]
        message = self.current[index]
        return 0 if message is None else self.meter.message(message)

    # Step 4: delete from the centre -----------------------------------------------------

    def recount(self) -> None:
        self.new_counts = {
            i: self.meter.message(m) for i, m in self.current.items() if m is not None
        }
        self.filtered_tokens = self.tokens()
        self.detail["tokens_after_filter"] = self.filtered_tokens

    def count_of(self, index: int) -> int:
        if index in self.current:
            return 0 if self.current[index] is None else self.new_counts[index]
        return self.counts[index]

    def tokens(self) -> int:
        return sum(self.count_of(i) for i in range(len(self.original)))

    def delete_from_centre(self) -> None:
        tokens = self.filtered_tokens
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
        self.deleted_tokens = sum(self.count_of(index) for index in deleted)
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
            tokens_after=self.filtered_tokens - self.deleted_tokens,
            removed_message_count=len(removed),
            detail=self.detail,
        )


def _protected_indexes(messages: Sequence[Message]) -> set[int]:
    """Leading system messages, the first and last message after them, `<command>` messages."""
    head_end = leading_system_count(messages)
    protected = set(range(head_end))
    if head_end < len(messages):
        protected.update({head_end, len(messages) - 1})
    protected.update(
        i for i, m in enumerate(messages) if _may_hold_command(m) and has_command_block(m)
    )
    return protected


def _may_hold_command(message: Mapping[str, Any]) -> bool:
    """False when no text of `message` holds "<command", so `has_command_block` is False: its
    joined text (`message_text`) holds "<command" only if one of the texts does, the joint
    being a newline. A substring test of each text, without joining them, is several times
    faster than the pattern over every text."""
    content = message.get("content")
    if isinstance(content, str):
        return "<command" in content
    for block in blocks_of(message):
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", ""))
        elif kind == "thinking":
            text = str(block.get("thinking", ""))
        elif kind == "tool_result":
            text = tool_result_text(block.get("content"))
        else:
            continue
        if "<command" in text:
            return True
    return False


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
