"""Export to a readable Markdown transcript: one section per message.

Tool calls show their input as JSON, tool results their text (marked when an error or made
up by ctxweb), thinking is quoted, images and documents are named, and compaction summaries
are headed as such. Code fences are longer than any backtick run inside them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from compaction import blocks_of, is_meta, is_summary_message, tool_result_text

__all__ = ["to_markdown"]

_BACKTICKS = re.compile(r"`+")


def to_markdown(messages: Iterable[Mapping[str, Any]], *, title: str = "") -> str:
    """The messages as a Markdown document."""
    sections = [f"# {title or 'Transcript'}"]
    count = 0
    for count, message in enumerate(messages, start=1):
        sections.append(_section(count, message))
    sections.insert(1, f"_{count} message{'s' if count != 1 else ''}_")
    return "\n\n".join(sections) + "\n"


def _section(number: int, message: Mapping[str, Any]) -> str:
    role = str(message.get("role", "")).capitalize() or "Message"
    if is_summary_message(message):
        heading = f"## {number}. Summary of earlier conversation"
    else:
        heading = f"## {number}. {role}" + (" (meta)" if is_meta(message) else "")
    content = message.get("content")
    if isinstance(content, str):
        return f"{heading}\n\n{content.strip()}"
    parts = [heading, *(_block(block) for block in blocks_of(message))]
    return "\n\n".join(part for part in parts if part)


def _block(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", "")).strip()
    if kind == "thinking":
        text = str(block.get("thinking") or "").strip() or "(hidden)"
        return "\n".join(["> **Thinking**", ">", *(f"> {line}" for line in text.splitlines())])
    if kind == "redacted_thinking":
        return "> **Thinking** (redacted)"
    if kind == "tool_use":
        body = json.dumps(block.get("input", {}), ensure_ascii=False, indent=2)
        return (
            f"**Tool call** `{block.get('name')}` (`{block.get('id')}`)\n\n{_fence(body, 'json')}"
        )
    if kind == "tool_result":
        flags = []
        if block.get("is_error"):
            flags.append("error")
        if block.get("ctxweb_synthetic"):
            flags.append("no result recorded")
        note = f" ({', '.join(flags)})" if flags else ""
        return f"**Tool result** for `{block.get('tool_use_id')}`{note}\n\n" + _fence(
            tool_result_text(block.get("content"), _block)
        )
    if kind == "image":
        source = _mapping(block.get("source"))
        if source.get("type") == "url":
            return f"![image]({source.get('url')})"
        return f"_[image: {source.get('media_type', 'unknown type')}]_"
    if kind == "document":
        return f"_[document: {block.get('title') or 'untitled'}]_"
    return f"_[{kind} block]_"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _fence(text: str, language: str = "") -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"
