"""Tool blocks (an assistant message's tool calls plus their results) and block removal.

Shared by the strategies that take tool calls out of a history (prune, smart truncation):
they find the blocks here and rebuild messages without some of their content blocks, so a
removed call always takes its result with it and no message is left empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from .messages import Block, Message

__all__ = ["ToolBlock", "rebuild_message", "tool_blocks", "without_blocks"]

#: Blocks that keep a message worth sending on their own. Thinking blocks do not: without
#: the text or tool calls they led to they are noise (and the API ties them to tool use).
_SUBSTANTIVE: Final = frozenset({"text", "tool_use", "tool_result", "image", "document"})


class ToolBlock(NamedTuple):
    """One tool block (docs/behaviour.md#selective-pruning): the assistant message at `call_index`
    with tool calls `ids`, answered by tool results in the message at `result_index` (its next
    message)."""

    call_index: int
    result_index: int
    ids: frozenset[str]


def tool_blocks(messages: Sequence[Mapping[str, Any]]) -> list[ToolBlock]:
    """The tool blocks of a valid history, oldest first."""
    blocks: list[ToolBlock] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):  # a string is one text block: no tool call
            continue
        ids = [
            str(block.get("id"))
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        if ids:
            blocks.append(ToolBlock(index, index + 1, frozenset(ids)))
    return blocks


def rebuild_message(message: Message, replace: Callable[[Block], Block | None]) -> Message | None:
    """`message` with each content block passed through `replace` (None drops the block).

    Returns the message itself when nothing changed (identity is kept), None when nothing
    substantive is left (the message should go), else a new message with the same extra keys.
    String content has no blocks to replace and is returned as is.
    """
    content = message.get("content")
    if not isinstance(content, list):
        return message
    changed = False
    kept: list[Any] = []
    for block in content:
        new = replace(block) if isinstance(block, dict) else block
        if new is not block:
            changed = True
        if new is not None:
            kept.append(new)
    return _with_content(message, kept) if changed else message


def without_blocks(
    message: Message, kind: str, ids: frozenset[str] | None = None
) -> Message | None:
    """`rebuild_message(message, replace)` where `replace` drops the blocks of type `kind`
    (only those whose `tool_use_id` is in `ids`, when given) and keeps every other block:
    the same message, None or a new message, without a call per block."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    if ids is None:
        kept = [b for b in content if not isinstance(b, dict) or b.get("type") != kind]
    else:
        kept = [
            b
            for b in content
            if not isinstance(b, dict) or b.get("type") != kind or b.get("tool_use_id") not in ids
        ]
    return message if len(kept) == len(content) else _with_content(message, kept)


def _with_content(message: Message, kept: list[Any]) -> Message | None:
    """`message` with the blocks `kept`, or None when none of them is substantive."""
    if not any(_is_substantive(block) for block in kept):
        return None
    return {**message, "content": kept}


def _is_substantive(block: Any) -> bool:
    if type(block) is not dict and not isinstance(block, Mapping):  # the ABC check last
        return False
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text) and not text.isspace()  # strip, no copy
    return kind in _SUBSTANTIVE
