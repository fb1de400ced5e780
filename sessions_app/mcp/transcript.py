"""Stored messages as text a model reads back (the read_messages tool).

One message per block headed `[index] role (time)`; a tool call is one line
(`call <name> <input as compact JSON> (<id>)`), its result one block under the message
that carries it (`result of <name> (<id>): ...`). A long text is cut with a marker that
says how much was left out and how to read it whole. Pages end under a token budget
estimated at four characters a token (the stored per-message counts are of the whole
messages, not of this rendering).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

__all__ = [
    "CHARS_PER_TOKEN",
    "CUT_CHARS",
    "PAGE_TOKENS",
    "Page",
    "Rendered",
    "page_of",
    "render_message",
]

#: Tokens of text one read_messages answer carries at most (about).
PAGE_TOKENS: Final = 8_000
#: The estimate behind the budget.
CHARS_PER_TOKEN: Final = 4
#: A text longer than this is cut (head and tail kept) unless its message is read alone.
CUT_CHARS: Final = 2_000


class Rendered(Protocol):
    """What a stored message offers the renderer (a Message row)."""

    seq: int
    role: str
    content: Any
    created_at: Any


@dataclass(frozen=True)
class Page:
    """The text of the messages that fit, and the index of the first one left out."""

    text: str
    first: int | None
    last: int | None
    next_start: int | None


def page_of(
    messages: Sequence[Rendered], *, whole: bool = False, budget: int = PAGE_TOKENS
) -> Page:
    """The messages that fit in `budget` tokens (the first one always does, cut to fit);
    `whole`: texts are not cut at CUT_CHARS (one message asked for)."""
    chars = budget * CHARS_PER_TOKEN
    names: dict[str, str] = {}
    parts: list[str] = []
    used = 0
    for message in messages:
        text = render_message(message, names, cut=chars if whole else CUT_CHARS)
        if parts and used + len(text) > chars:
            return Page("\n\n".join(parts), messages[0].seq, _last(parts, messages), message.seq)
        parts.append(_cut(text, chars) if not parts else text)
        used += len(text)
    if not parts:
        return Page("", None, None, None)
    return Page("\n\n".join(parts), messages[0].seq, messages[-1].seq, None)


def _last(parts: list[str], messages: Sequence[Rendered]) -> int:
    return messages[len(parts) - 1].seq


def render_message(message: Rendered, names: dict[str, str], *, cut: int = CUT_CHARS) -> str:
    """One message as text; `names` maps tool call ids to tool names (filled as calls pass)."""
    when = f" ({message.created_at:%Y-%m-%d %H:%M:%S})" if message.created_at else ""
    lines = [f"[{message.seq}] {message.role}{when}:"]
    lines.extend(_content_lines(message.content, names, cut))
    return "\n".join(lines)


def _content_lines(content: Any, names: dict[str, str], cut: int) -> Iterable[str]:
    if isinstance(content, str):
        yield _cut(content, cut)
        return
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        if isinstance(block, Mapping):
            yield _block_line(block, names, cut)
        elif block is not None:
            yield _cut(str(block), cut)


def _block_line(block: Mapping[str, Any], names: dict[str, str], cut: int) -> str:
    kind = block.get("type")
    if kind == "tool_use":
        call_id = str(block.get("id", ""))
        names[call_id] = str(block.get("name", ""))
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
        return f"call {names[call_id]} {_cut(arguments, cut)} ({call_id})"
    if kind == "tool_result":
        call_id = str(block.get("tool_use_id", ""))
        error = " error" if block.get("is_error") else ""
        body = "\n".join(_content_lines(block.get("content", ""), names, cut))
        return f"result{error} of {names.get(call_id, 'a tool')} ({call_id}): {_cut(body, cut)}"
    if isinstance(block.get("text"), str):
        return _cut(str(block["text"]), cut)
    if kind == "thinking":
        return f"(thinking) {_cut(str(block.get('thinking', '')), cut)}"
    return f"({kind or 'block'})"


def _cut(text: str, limit: int) -> str:
    """`text`, or its head and tail around a marker saying what was left out."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2, 1)
    left = len(text) - 2 * keep
    marker = f" [... {left:,} characters cut: read this message alone to see it whole ...] "
    return text[:keep] + marker + text[-keep:]
