"""Exporters: canonical messages to Anthropic JSON, OpenAI chat JSON or Markdown. No Django.

`export_messages(messages, fmt, title=...)` returns the body with its media type and file
extension; `to_anthropic`, `to_openai`, `to_responses` (OpenAI Responses items) and
`to_markdown` give the structures themselves.
The JSON formats are requests a client can send: roles alternate (the engine's
`merge_adjacent_roles`, tool results first in a merged user message), and system messages
after the first other message are rendered as each API accepts them; the Markdown
transcript keeps every stored message as its own section (docs/exports.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .anthropic import clean_block, request_messages, to_anthropic
from .markdown import to_markdown
from .openai import to_openai
from .responses import to_responses

__all__ = [
    "EXPORT_FORMATS",
    "Export",
    "clean_block",
    "export_messages",
    "request_messages",
    "to_anthropic",
    "to_markdown",
    "to_openai",
    "to_responses",
]

#: Export format name -> (media type, file extension).
EXPORT_FORMATS: Final = {
    "anthropic": ("application/json", "json"),
    "openai": ("application/json", "json"),
    "responses": ("application/json", "json"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
}


@dataclass(frozen=True)
class Export:
    """An exported transcript: its text, media type and file extension."""

    body: str
    media_type: str
    extension: str


def export_messages(messages: Iterable[Mapping[str, Any]], fmt: str, *, title: str = "") -> Export:
    """The messages in format `fmt` (anthropic, openai, responses or markdown); ValueError if
    unknown."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(EXPORT_FORMATS)}")
    media_type, extension = EXPORT_FORMATS[fmt]
    if fmt == "markdown":
        return Export(to_markdown(messages, title=title), media_type, extension)
    converters = {"anthropic": to_anthropic, "openai": to_openai, "responses": to_responses}
    body = converters[fmt](messages)
    return Export(json.dumps(body, ensure_ascii=False, indent=2), media_type, extension)
