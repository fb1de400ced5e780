"""The trigger check and the head / middle / tail partition
(docs/behaviour.md#trigger-and-partition).

Head: the leading system messages (a later system message is middle or tail content).
Tail: the newest messages, scanned from the end until their tokens reach the tail budget
(the message that crosses it is kept whole), at least
`keep_recent_messages` of them, and, when selective pruning is in the chain, the newest
`dialogue_rounds_keep_min` user rounds (docs/behaviour.md#round-protection). A
`tail_retention_ratio` of 0 means no token budget: the tail is exactly `keep_recent_messages`
(docs/behaviour.md#trigger-and-partition). The tail never starts on a tool_result, so a tool_use is
never separated from its result (this may move the start earlier). Middle: what lies between.

A forced compaction (the user or the agent asked for one) whose token-budget tail would
cover everything falls back to the count tail of `keep_recent_messages`, so "compact now"
on a session smaller than the tail budget still summarizes its older messages.

Round protection never makes compaction impossible: a round is pulled into the tail only
while head + summary + tail stay under the trigger threshold, and never when that would
leave the middle empty. So a session of one prompt and many tool calls (one round) keeps
its token-budget tail, and its prompt and older tool traffic are the middle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .messages import Message, is_safe_cut, starts_round
from .policy import Policy
from .results import Partition
from .tokens import count_tokens, message_token_counts
from .validation import ensure_valid

__all__ = ["leading_system_count", "partition", "should_compact", "split_points"]


def should_compact(messages: Sequence[Message], policy: Policy | None = None) -> bool:
    """True when the tokens, scaled by the safety factor, reach the trigger threshold.

    An empty list is never compacted, nor is anything when the policy is disabled; a count
    exactly at the threshold triggers (docs/behaviour.md#trigger-and-partition, `>=`).
    """
    policy = policy or Policy()
    ensure_valid(messages)
    if not messages or not policy.enabled:
        return False
    return policy.over_threshold(count_tokens(messages, encoding=policy.encoding))


def partition(
    messages: Sequence[Message],
    policy: Policy | None = None,
    *,
    token_counts: Sequence[int] | None = None,
    force: bool = False,
) -> Partition:
    """Split `messages` into head, middle and tail (new lists holding the same dicts).

    `token_counts` (one per message, e.g. cached by the web app) saves a re-count; `force`
    (a compaction someone asked for) keeps a middle whenever more than
    `keep_recent_messages` messages follow the head.
    """
    policy = policy or Policy()
    ensure_valid(messages)
    head_end, tail_start = split_points(messages, policy, token_counts=token_counts, force=force)
    return Partition(
        head=list(messages[:head_end]),
        middle=list(messages[head_end:tail_start]),
        tail=list(messages[tail_start:]),
    )


def leading_system_count(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many messages at the start are system messages (the head)."""
    count = 0
    for message in messages:
        if message.get("role") != "system":
            break
        count += 1
    return count


def split_points(
    messages: Sequence[Mapping[str, Any]],
    policy: Policy,
    *,
    token_counts: Sequence[int] | None = None,
    force: bool = False,
) -> tuple[int, int]:
    """`(head_end, tail_start)`: the middle is `messages[head_end:tail_start]`.

    The input is assumed valid (callers validate first).
    """
    counts = (
        list(token_counts)
        if token_counts is not None
        else message_token_counts(messages, policy.encoding)
    )
    if len(counts) != len(messages):
        raise ValueError("token_counts must hold one count per message")
    head_end = leading_system_count(messages)
    start = len(messages)
    if policy.tail_retention_ratio > 0:
        start = _budget_start(counts, head_end, policy.tail_retention_tokens)
    count_start = len(messages) - policy.keep_recent_messages
    start = _safe_start(messages, head_end, max(head_end, min(start, count_start)))
    if force and start <= head_end:
        start = _safe_start(messages, head_end, max(head_end, count_start))
    if "selective" in policy.steps and policy.dialogue_rounds_keep_min > 0:
        start = _protect_rounds(messages, counts, head_end, start, policy)
    return head_end, start


def _budget_start(counts: Sequence[int], head_end: int, budget: int) -> int:
    """Scan from the end until the tail's tokens reach `budget`; the last one stays whole."""
    total = 0
    index = len(counts)
    while index > head_end:
        index -= 1
        total += counts[index]
        if total >= budget:
            break
    return index


def _protect_rounds(
    messages: Sequence[Mapping[str, Any]],
    counts: Sequence[int],
    head_end: int,
    start: int,
    policy: Policy,
) -> int:
    """Move the (safe) tail start back to cover the newest user rounds
    (docs/behaviour.md#round-protection).

    Newest round first, a round is pulled in while head + summary + tail stay under the
    trigger threshold and some message is left in the middle (see the module doc).
    """
    rounds = _newest_round_starts(messages, head_end, policy.dialogue_rounds_keep_min)
    protected = [index for index in rounds if index < start]
    fixed = sum(counts[:head_end]) + policy.summary_max_tokens
    tail_tokens = sum(counts[start:])
    chosen = start
    for round_start in reversed(protected):
        candidate = _safe_start(messages, head_end, round_start)
        if candidate <= head_end:
            break  # the middle would be empty: nothing left to compact
        tail_tokens += sum(counts[candidate:chosen])
        if policy.over_threshold(fixed + tail_tokens):
            break
        chosen = candidate
    return chosen


def _newest_round_starts(
    messages: Sequence[Mapping[str, Any]], head_end: int, rounds: int
) -> list[int]:
    """The last `rounds` (> 0) of `round_starts(messages)` at or after `head_end`, oldest
    first: found from the end, so only the newest rounds are read."""
    found: list[int] = []
    index = len(messages)
    while index > head_end and len(found) < rounds:
        index -= 1
        if starts_round(messages[index]):
            found.append(index)
    found.reverse()
    return found


def _safe_start(messages: Sequence[Mapping[str, Any]], head_end: int, start: int) -> int:
    """Move the tail start earlier until it splits no tool pair (never on a tool_result)."""
    while start > head_end and not is_safe_cut(messages, start):
        start -= 1
    return start
