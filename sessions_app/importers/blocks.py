"""Small helpers that build and repair canonical content blocks, shared by every importer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from compaction import Block

from .source import load_json

__all__ = [
    "EMPTY_TEXT",
    "IMAGE_MISSING_TEXT",
    "NO_RESULT_TEXT",
    "NO_SUMMARY_TEXT",
    "content_text",
    "image_block",
    "mapping",
    "parse_arguments",
    "parse_time",
    "prompt_text",
    "short_title",
    "text_block",
]

#: Text of the synthetic tool_result that answers a tool call the source never answered.
NO_RESULT_TEXT: Final = "[ctxweb: no result was recorded for this tool call]"
#: Placeholder for a message whose content was empty in the source.
EMPTY_TEXT: Final = "[ctxweb: empty message in the source]"
#: Placeholder for an image the source recorded without its data.
IMAGE_MISSING_TEXT: Final = "[ctxweb: image without data in the source]"
#: Summary text of a compaction point whose summary the source did not record.
NO_SUMMARY_TEXT: Final = "[ctxweb: the source recorded no summary for this compaction]"

_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a mapping, else an empty one (for optional nested objects)."""
    return value if isinstance(value, Mapping) else {}


def text_block(text: str) -> Block:
    """A text block."""
    return {"type": "text", "text": text}


def image_block(url: Any) -> Block:
    """An image block for a URL or a data URL; a placeholder text block when there is none."""
    if isinstance(url, Mapping):
        url = url.get("url")
    if not isinstance(url, str) or not url:
        return text_block(IMAGE_MISSING_TEXT)
    match = _DATA_URL.match(url)
    if match:
        source = {"type": "base64", "media_type": match["media"], "data": match["data"]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's input object from a JSON-string argument; {"raw": str} when it is not one."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if arguments is None or arguments == "":
        return {}
    if not isinstance(arguments, str):
        return {"raw": arguments}
    try:
        value = load_json(arguments)
    except ValueError:
        return {"raw": arguments}
    return value if isinstance(value, dict) else {"raw": arguments}


def content_text(content: Any) -> str:
    """The readable text of a content value (string, blocks or parts), joined by newlines.

    This reads raw import data before it is normalized: bare strings, a single object, any
    part with a `text` (`input_text`, `output_text`), thinking and nested tool results. The
    text of a canonical tool result is `compaction.tool_result_text`.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, Iterable):
        return "" if content is None else str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping):
            text = block.get("text")
            if text is None and block.get("type") == "tool_result":
                text = content_text(block.get("content"))
            if text is None and block.get("type") == "thinking":
                text = block.get("thinking")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


def parse_time(value: Any) -> datetime | None:
    """An aware datetime from an ISO 8601 string or a Unix timestamp; None when unreadable."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 10**11 else value  # milliseconds
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


#: What an agent adds around a person's words: Claude Code's `<system-reminder>` sections.
_REMINDER: Final = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def prompt_text(content: Any) -> str:
    """The text a person wrote in a user message's `content`: its text without the
    `<system-reminder>` sections an agent such as Claude Code puts before it."""
    return _REMINDER.sub("", content_text(content)).strip()


def short_title(text: str, limit: int = 80) -> str:
    """The first line of `text`, shortened to `limit` characters."""
    line = " ".join(text.strip().split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
