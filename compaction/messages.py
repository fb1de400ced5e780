"""The canonical message model (Anthropic-style dicts) and small helpers over it.

A message is `{"role": "system"|"user"|"assistant", "content": str | [block, ...], ...}`;
extra keys (`id`, `created_at`, `usage`, `is_meta`, ...) pass through the engine untouched.
System messages may stand anywhere: the leading ones are the head every strategy keeps,
later ones (Claude Code 2.1 sends some mid-conversation) are ordinary content. Tool ids may
repeat across turns: a tool_result answers the tool_use of the message right before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "LINE_BREAKS",
    "SUMMARY_KEY",
    "SUMMARY_PREFIX",
    "Block",
    "Message",
    "blocks_of",
    "first_nonblank_line",
    "is_meta",
    "is_safe_cut",
    "is_summary_message",
    "make_summary_message",
    "message_text",
    "round_starts",
    "starts_round",
    "tool_result_ids",
    "tool_result_text",
    "tool_use_ids",
]

Message = dict[str, Any]
Block = dict[str, Any]

#: Extra key that marks a summary message made by a compaction; its value is metadata.
SUMMARY_KEY: Final = "ctxweb_summary"
#: First line of every summary message, so a summary is recognisable even when extra keys are
#: stripped (for example after a round trip through a client that keeps only role and content).
SUMMARY_PREFIX: Final = "[ctxweb summary of earlier conversation]"


def blocks_of(message: Mapping[str, Any]) -> list[Block]:
    """The content blocks of a message; string content is one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def tool_use_ids(message: Mapping[str, Any]) -> list[str]:
    """Ids of the tool_use blocks in a message, in order."""
    return [str(b.get("id")) for b in blocks_of(message) if b.get("type") == "tool_use"]


def tool_result_ids(message: Mapping[str, Any]) -> list[str]:
    """tool_use_ids answered by the tool_result blocks in a message, in order."""
    return [str(b.get("tool_use_id")) for b in blocks_of(message) if b.get("type") == "tool_result"]


def is_meta(message: Mapping[str, Any]) -> bool:
    """True for injected bookkeeping messages (`is_meta`), which do not start a user round."""
    return bool(message.get("is_meta") or message.get("isMeta"))


def is_summary_message(message: Mapping[str, Any]) -> bool:
    """True for a summary message produced by an earlier compaction."""
    if SUMMARY_KEY in message:
        return True
    content = message.get("content")
    if type(content) is str:  # the commonest shape first (same test as below)
        return content.startswith(SUMMARY_PREFIX)
    if (type(content) is list or isinstance(content, list)) and content:
        first = content[0]
        if type(first) is dict or isinstance(first, dict):
            content = first.get("text")
            if type(content) is str:  # a text block's text: the commonest first block
                return content.startswith(SUMMARY_PREFIX)
    return isinstance(content, str) and content.startswith(SUMMARY_PREFIX)


def make_summary_message(summary: str, **metadata: Any) -> Message:
    """The user message that stands for a compacted span: the marked summary text."""
    text = summary if summary.startswith(SUMMARY_PREFIX) else f"{SUMMARY_PREFIX}\n{summary}"
    return {"role": "user", "content": text, SUMMARY_KEY: dict(metadata)}


def message_text(message: Mapping[str, Any]) -> str:
    """All readable text of a message (text, thinking, tool results), joined by newlines."""
    return "\n".join(_block_texts(blocks_of(message)))


def _block_texts(blocks: Sequence[Block]) -> Iterator[str]:
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            yield str(block.get("text", ""))
        elif kind == "thinking":
            yield str(block.get("thinking", ""))
        elif kind == "tool_result":
            yield tool_result_text(block.get("content"))


def tool_result_text(
    content: Any, render: Callable[[Mapping[str, Any]], str | None] | None = None
) -> str:
    """The readable text of a tool_result's `content`: the one extractor of it.

    A string is its own text. In a block list each text block gives its text (a missing one
    gives ""), and each other block (image, document) gives `render(block)`, or nothing when
    there is no `render` or it returns None; the parts are joined by newlines. Items that are
    not objects, and content that is neither a string nor a list (None), give nothing.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            text = block.get("text")
            parts.append("" if text is None else str(text))
        elif render is not None and (rendered := render(block)) is not None:
            parts.append(rendered)
    return "\n".join(parts)


def is_safe_cut(messages: Sequence[Mapping[str, Any]], index: int) -> bool:
    """True when cutting the list before `index` separates no tool_use from its tool_result.

    In a valid list a tool_result always sits in the message right after its tool_use, so a
    cut is safe unless the message at `index` answers tool calls.
    """
    if index <= 0 or index >= len(messages):
        return True
    return not tool_result_ids(messages[index])


def starts_round(message: Mapping[str, Any]) -> bool:
    """True for a real user turn: a user message with text, not meta and not only tool results."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, list):  # `blocks_of` without building its list
        for block in content:
            if isinstance(block, dict) and block.get("type") != "tool_result":
                break
        else:
            return False  # only tool results (the commonest user message of an agent)
    elif not isinstance(content, str):
        return False
    return not (is_meta(message) or is_summary_message(message))


def round_starts(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the messages that start a user round (docs/behaviour.md#round-protection), oldest
    first."""
    return [index for index, message in enumerate(messages) if starts_round(message)]


#: What str.splitlines splits on ("\r\n" is "\r" then "\n").
LINE_BREAKS: Final = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK: Final = re.compile(f"[{LINE_BREAKS}]")
_NON_SPACE: Final = re.compile(r"\S")


def first_nonblank_line(text: str) -> str:
    """`next((line for line in text.splitlines() if line.strip()), "")`, without splitting
    the whole text: the line around its first non-whitespace character."""
    found = _NON_SPACE.search(text)
    if found is None:
        return ""
    start = found.start()
    while start and text[start - 1] not in LINE_BREAKS:  # only whitespace back there
        start -= 1
    end = _BREAK.search(text, found.start())
    return text[start : end.start() if end is not None else len(text)]
