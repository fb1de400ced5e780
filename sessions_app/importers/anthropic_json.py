"""Anthropic Messages requests: `{"system": ..., "messages": [...]}` or a bare message list.

The content is already canonical; the system prompt becomes a leading system message, and
`role: "system"` messages inside `messages` (as Claude Code's recorded requests carry them)
lead the history or, after the conversation began, become marked user messages. A
`compaction` block in an assistant message (server-side compaction, `compact_20260112`) is
a compaction point whose summary is its `content` (provider_compaction.py). Other message
keys are kept as import data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .blocks import content_text, parse_time, short_title
from .builder import SessionBuilder
from .chat_detect import anthropic_head_score, chat_format
from .errors import TranscriptError
from .registry import ImportFormat
from .types import ImportedMessage, ImportedSession

__all__ = ["IMPORT_FORMAT", "parse_anthropic"]

FORMAT: Final = "anthropic"


def parse_anthropic(document: Any, name: str = "") -> ImportedSession:
    """Import an Anthropic `{system, messages}` request (or a list of messages)."""
    if isinstance(document, Mapping) and isinstance(document.get("messages"), list):
        messages, system, model = (
            document["messages"],
            document.get("system"),
            document.get("model"),
        )
    elif isinstance(document, list):
        messages, system, model = document, None, None
    else:
        raise TranscriptError("an Anthropic import needs {system, messages: [...]} or a list")
    builder = SessionBuilder(FORMAT, source_name=name)
    if isinstance(system, str | list) and content_text(system).strip():
        builder.add(ImportedMessage(message={"role": "system", "content": system}))
    first_prompt = ""
    for number, raw in enumerate(messages, start=1):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("role"), str):
            builder.skip(number, f"messages[{number - 1}] is not a message with a role")
            continue
        passthrough = {k: v for k, v in raw.items() if k not in {"role", "content"}}
        message = {"role": raw["role"], "content": raw.get("content")}
        for key in ("is_meta",):
            if key in passthrough:
                message[key] = passthrough.pop(key)
        if raw["role"] == "user" and not first_prompt and not message.get("is_meta"):
            first_prompt = content_text(raw.get("content")).strip()
        builder.add(
            ImportedMessage(
                message=message,
                created_at=parse_time(passthrough.get("created_at")),
                original_id=str(passthrough.get("id") or ""),
                usage=passthrough.get("usage")
                if isinstance(passthrough.get("usage"), dict)
                else None,
                extra={"source": passthrough} if passthrough else {},
            )
        )
    session = builder.finish()
    session.model = model if isinstance(model, str) else ""
    session.title = short_title(first_prompt or name)
    return session


def _is_anthropic(document: Any) -> bool:
    return chat_format(document) == "anthropic"


IMPORT_FORMAT: Final = ImportFormat(
    name=FORMAT,
    label="Anthropic messages",
    file_label="Anthropic messages",
    aliases=("anthropic_json",),
    detect=_is_anthropic,
    guess_head=anthropic_head_score,
    read_document=parse_anthropic,
    rank=30,
)
