"""Selective pruning of old tool blocks (docs/behaviour.md#selective-pruning, #round-protection).

A tool block is an assistant message's tool_use blocks plus the tool_results answering them
in the next message. The newest `tool_blocks_keep_recent` blocks are kept; older blocks are
dropped whole. In kept blocks, tool_use inputs over `tool_call_threshold` tokens and
tool_result contents over `tool_result_threshold` tokens are cut to their first
`preview_tokens` tokens plus `[TRUNCATED original~N tokens]`.

Decisions where the seed is silent:
- Dropping a block removes its tool_use and tool_result blocks only. Text (and images or
  documents) in the same messages stays, so prune never removes user or assistant text, in
  any round. A message is removed when nothing but thinking blocks would be left.
- A cut tool_use input becomes `{"_truncated": "<preview of its compact JSON>\n[TRUNCATED
  original~N tokens]"}` so `input` stays an object. A cut tool_result content becomes a
  string (text of its text blocks, then the marker); `is_error` and other keys are kept.
  N counts the compact JSON of the input, or the result content as `count_tokens` does.
  A cut that would not lower the count is not made.
- Round protection (docs/behaviour.md#round-protection): `protected_start` gives the index where the
  newest `dialogue_rounds_keep_min` rounds begin (a round starts at a real user message, never at
  an `is_meta` one). Only messages before it take part in user/assistant compression (the
  summary step); prune itself never drops user or assistant text, which honours the
  protection everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .alternation import merge_groups, merge_run
from .messages import Block, Message, round_starts, tool_result_text
from .policy import Policy
from .preview import token_preview
from .results import PruneResult
from .tokens import compact_json, count_text_tokens, message_tokens
from .toolpairs import ToolBlock, rebuild_message, tool_blocks, without_blocks
from .validation import ensure_valid

__all__ = ["protected_start", "prune_tool_blocks"]


def protected_start(messages: Sequence[Mapping[str, Any]], rounds: int) -> int:
    """Index of the first message of the newest `rounds` user rounds
    (docs/behaviour.md#round-protection).

    `len(messages)` when `rounds` is 0 (nothing protected); 0 when the history has no more
    than `rounds` rounds (everything protected).
    """
    if rounds <= 0:
        return len(messages)
    starts = round_starts(messages)
    if len(starts) <= rounds:
        return 0
    return starts[-rounds]


def prune_tool_blocks(
    messages: Sequence[Message], policy: Policy | None = None, *, merge_roles: bool = True
) -> PruneResult:
    """Keep the newest tool blocks, drop older ones whole, cut big fields of kept ones.

    Raises InvalidMessagesError for a history that is not a valid request. The input is
    never modified; untouched messages keep their identity in the new list. Same-role
    neighbours left by removed messages are merged (`compaction.alternation`), unless
    `merge_roles` is False (compact_messages merges once, after its summary).
    """
    policy = policy or Policy()
    ensure_valid(messages)
    blocks = tool_blocks(messages)
    keep_count = min(policy.tool_blocks_keep_recent, len(blocks))
    kept = blocks[len(blocks) - keep_count :]
    dropped = blocks[: len(blocks) - keep_count]
    pruner = _Pruner(policy)
    replacements: dict[int, Message | None] = {}
    for block in dropped:
        _drop_block(messages, block, replacements)
    for block in kept:
        pruner.cut_block(messages, block, replacements)
    new: list[Message | None] = list(messages)
    for i, message in replacements.items():
        new[i] = message
    sources = [i for i, message in enumerate(new) if message is not None]
    result = [message for message in new if message is not None]
    merged, firsts, absorbed, merged_into = _merged(result, sources, merge_roles)
    touched = sorted(replacements)  # only these can be dropped or changed (or merged into)
    return PruneResult(
        messages=merged,
        tool_blocks_kept=len(kept),
        tool_blocks_dropped=len(dropped),
        tool_calls_truncated=pruner.calls_cut,
        tool_results_truncated=pruner.results_cut,
        dropped_messages=[messages[i] for i in touched if new[i] is None],
        changed_messages=[
            messages[i]
            for i in sorted({*touched, *merged_into})
            if new[i] is not None
            and i not in absorbed
            and (i in merged_into or new[i] is not messages[i])
        ],
        merged_messages=[messages[i] for i in sorted(absorbed)],
        source_indexes=firsts,
    )


def _merged(
    result: list[Message], sources: list[int], merge_roles: bool
) -> tuple[list[Message], list[int], set[int], set[int]]:
    """`result` with same-role neighbours merged (when `merge_roles`): the messages, the
    source index of each, and the source indexes absorbed and merged into."""
    if not merge_roles:  # one message per group: nothing absorbed, nothing merged into
        return result, sources, set(), set()
    groups = merge_groups(result, sources)
    absorbed = {sources[n] for group in groups for n in group[1:]}
    merged_into = {sources[group[0]] for group in groups if len(group) > 1}
    merged = [merge_run([result[n] for n in group]) for group in groups]
    return merged, [sources[group[0]] for group in groups], absorbed, merged_into


def _drop_block(
    messages: Sequence[Message], block: ToolBlock, replacements: dict[int, Message | None]
) -> None:
    replacements[block.call_index] = without_blocks(messages[block.call_index], "tool_use")
    replacements[block.result_index] = without_blocks(
        messages[block.result_index], "tool_result", block.ids
    )


@dataclass
class _Pruner:
    """Cuts the big fields of kept blocks and counts what it cut."""

    policy: Policy
    calls_cut: int = 0
    results_cut: int = 0
    _encoding: str = field(init=False)

    def __post_init__(self) -> None:
        self._encoding = self.policy.encoding

    def cut_block(
        self,
        messages: Sequence[Message],
        block: ToolBlock,
        replacements: dict[int, Message | None],
    ) -> None:
        replacements[block.call_index] = rebuild_message(messages[block.call_index], self._cut_call)
        replacements[block.result_index] = rebuild_message(
            messages[block.result_index], self._cut_result
        )

    def _cut_call(self, item: Block) -> Block:
        if item.get("type") != "tool_use":
            return item
        arguments = compact_json(item.get("input", {}))
        tokens = count_text_tokens(arguments, self._encoding)
        if tokens <= self.policy.tool_call_threshold:
            return item
        preview = token_preview(arguments, self.policy.preview_tokens, tokens, self._encoding)
        new_input = {"_truncated": preview}
        if count_text_tokens(compact_json(new_input), self._encoding) >= tokens:
            return item
        self.calls_cut += 1
        return {**item, "input": new_input}

    def _cut_result(self, item: Block) -> Block:
        if item.get("type") != "tool_result":
            return item
        tokens = message_tokens({"content": [item]}, self._encoding)
        if tokens <= self.policy.tool_result_threshold:
            return item
        text = tool_result_text(item.get("content"))
        preview = token_preview(text, self.policy.preview_tokens, tokens, self._encoding)
        if count_text_tokens(preview, self._encoding) >= tokens:
            return item
        self.results_cut += 1
        return {**item, "content": preview}
