"""Role alternation: user and assistant turns take turns (issue 10; README, "The Python library").

A history *alternates* when no two neighbouring messages are both user messages or both
assistant messages. System messages are not turns: they never break alternation and they
separate the turns around them, so `[user, system, user]` alternates. (A provider without a
system role mid-conversation needs such a message turned into user text first; merging the
result joins it with its user neighbours, in order.)

The engine steps that remove messages (selective pruning, smart truncation, the summary of
`compact_messages`) merge the same-role neighbours they made, so an alternating input gives
an alternating output. Neighbours that were already neighbours in the input, untouched,
stay apart: the engine does not rewrite what it did not change. `merge_adjacent_roles`
merges every same-role pair, for histories of unknown origin (stored contexts, exports);
two options shape a request for a provider (docs/exports.md): `tool_results_first` puts the
tool_result blocks of a merged user message before its other blocks (the Anthropic API
wants them first), and `merge_system` merges neighbouring system messages too.

A merge of `first` and `second`:
- appends `second`'s content blocks to `first`'s (a string content becomes one text block),
  so block order is kept and so is tool pairing: in a valid history the first of two
  merged assistant messages holds no tool calls (their results would have to follow it)
  and the second of two merged user messages holds no results (their calls would have to
  precede it);
- keeps `first`'s extra keys (`id`, `usage`, a summary's metadata, the web app's entry
  key), so the merged message stands for `first` and `second` is absorbed; `is_meta` is
  kept only when both messages are meta (a real user turn stays a round start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .messages import Block, Message, is_meta
from .validation import ensure_valid

__all__ = [
    "alternates",
    "merge_adjacent_roles",
    "merge_groups",
    "merge_messages",
    "merge_new_neighbours",
    "merge_run",
    "same_role_neighbours",
    "sources_by_identity",
]

_TURN_ROLES: Final = frozenset({"user", "assistant"})
_META_KEYS: Final = ("is_meta", "isMeta")


def same_role_neighbours(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes `i` where messages `i - 1` and `i` are both user or both assistant messages."""
    return [
        index
        for index in range(1, len(messages))
        if _same_turn(messages[index - 1], messages[index])
    ]


def alternates(messages: Sequence[Mapping[str, Any]]) -> bool:
    """True when user and assistant messages take turns (system messages separate turns).

    Raises InvalidMessagesError when a message or block is malformed.
    """
    ensure_valid(messages, check_order=False)
    return not same_role_neighbours(messages)


def merge_messages(first: Mapping[str, Any], second: Mapping[str, Any]) -> Message:
    """One message holding `first`'s blocks then `second`'s, with `first`'s extra keys."""
    merged: Message = {**first, "content": [*_blocks(first), *_blocks(second)]}
    if is_meta(first) and not is_meta(second):
        for key in _META_KEYS:
            merged.pop(key, None)
    return merged


def merge_adjacent_roles(
    messages: Sequence[Message], *, tool_results_first: bool = False, merge_system: bool = False
) -> list[Message]:
    """`messages` with every run of neighbouring same-role user/assistant messages merged.

    For histories the engine did not produce itself, e.g. a stored context before it is
    sent to a provider. Messages that are not merged keep their identity; the input is never
    modified. Merging never adds or removes a token (see `compaction.tokens`). With
    `tool_results_first`, a merged user message holds its tool_result blocks first, each
    group in its order, so a tool_use stays answered at the start of the next message; with
    `merge_system`, runs of system messages are merged as well (module doc). Raises
    InvalidMessagesError when a message or block is malformed; the order is not checked (a
    stored context may end with tool calls still waiting for their results).
    """
    ensure_valid(messages, check_order=False)
    roles = _TURN_ROLES | {"system"} if merge_system else _TURN_ROLES
    groups = _groups(messages, [None] * len(messages), roles)
    merged = [merge_run([messages[i] for i in group]) for group in groups]
    if tool_results_first:
        return [
            _results_first(message) if len(group) > 1 else message
            for message, group in zip(merged, groups, strict=True)
        ]
    return merged


def merge_new_neighbours(
    messages: Sequence[Message], sources: Sequence[int | None]
) -> list[Message]:
    """`messages` with the same-role neighbours an engine step made merged (module doc).

    `sources[i]` is the input index `messages[i]` comes from, None for a new message (a
    summary). Two neighbours are merged unless they come from neighbouring input messages.
    """
    return [merge_run([messages[i] for i in group]) for group in merge_groups(messages, sources)]


def merge_groups(messages: Sequence[Message], sources: Sequence[int | None]) -> list[list[int]]:
    """The positions of `messages` in runs that merge into one message, in order.

    A run of one is a message that stays as it is (see `merge_new_neighbours`).
    """
    return _groups(messages, sources, _TURN_ROLES)


def _groups(
    messages: Sequence[Message], sources: Sequence[int | None], roles: frozenset[str]
) -> list[list[int]]:
    if len(sources) != len(messages):
        raise ValueError("sources must hold one input index per message")
    groups: list[list[int]] = []
    for index, message in enumerate(messages):
        if index and _same_turn(messages[index - 1], message, roles):
            before, source = sources[index - 1], sources[index]
            if before is None or source != before + 1:
                groups[-1].append(index)
                continue
        groups.append([index])
    return groups


def sources_by_identity(
    messages: Sequence[Message], original: Sequence[Message]
) -> list[int | None]:
    """For each message, its index in `original` when it is one of those objects, else None."""
    index_of = {id(message): index for index, message in enumerate(original)}
    return [index_of.get(id(message)) for message in messages]


def merge_run(run: Sequence[Message]) -> Message:
    """The messages of `run` merged into one (the message itself for a run of one)."""
    merged = run[0]
    for message in run[1:]:
        merged = merge_messages(merged, message)
    return merged


def _same_turn(
    first: Mapping[str, Any], second: Mapping[str, Any], roles: frozenset[str] = _TURN_ROLES
) -> bool:
    role = first.get("role")
    return role in roles and role == second.get("role")


def _results_first(message: Message) -> Message:
    """A merged user message with its tool_result blocks moved before the others."""
    if message.get("role") != "user":
        return message
    blocks = message["content"]
    results = [block for block in blocks if block.get("type") == "tool_result"]
    others = [block for block in blocks if block.get("type") != "tool_result"]
    return {**message, "content": results + others}


def _blocks(message: Mapping[str, Any]) -> list[Block]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return list(content)
    return []
