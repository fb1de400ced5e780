"""The OpenAI form of the context response: built from the entries, extended after appends.

The body is `json.dumps({"system": …, "messages": […]})` without its closing brace (the
tail, services/context/text.py, adds `tokens`, `limit` and `usage`). Conversion is not one
message per entry (exporters/openai.py: same-role neighbours merge, a system message after
a tool call moves after its answer), so appended entries extend the body only when they
convert as they would alone (`continues_openai`): their first message neither merges with
the last one already converted nor is a system message held back after a tool call, and no
system message is already held at the end. Otherwise the caller rebuilds; either way the
bytes are those of a full build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from compaction import blocks_of
from sessions_app.exporters import to_openai
from sessions_app.exporters.openai import continues_openai, openai_tail
from sessions_app.models import ContextEntry, Session
from sessions_app.services.sessions.entries import entry_message, load_entries

__all__ = ["OpenAIBody", "openai_body", "openai_extended", "system_text"]


@dataclass(frozen=True)
class OpenAIBody:
    """The profile-independent part of an OpenAI response and what extending it needs.

    `open_tail`: the messages hold a non-system one (so `system` is final) and no system
    message waits at the end for a tool call's answer; `last_role` and `asks_tools`: the
    last converted message's stored role and whether it calls tools.
    """

    body: bytes
    tokens: int
    last_position: int
    open_tail: bool
    last_role: str
    asks_tools: bool


def openai_body(session: Session) -> OpenAIBody:
    """The OpenAI body of all the entries of `session`."""
    entries = load_entries(session)
    messages = [entry_message(entry) for entry in entries]
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    payload = {"system": system_text(messages[:head]), "messages": _converted(messages)}
    body = json.dumps(payload, cls=DjangoJSONEncoder)[:-1].encode()
    tail = openai_tail(messages)
    return OpenAIBody(
        body=body,
        tokens=sum(entry.token_count for entry in entries),
        last_position=entries[-1].position if entries else -1,
        open_tail=head < len(messages) and tail is not None,
        last_role=tail[0] if tail else "",
        asks_tools=bool(tail and tail[1]),
    )


def openai_extended(
    session: Session, *, last_position: int, last_role: str, asks_tools: bool
) -> OpenAIBody | None:
    """The entries after `last_position` as the end of a body whose last message has
    `last_role` and `asks_tools`, or None when there are none or they do not convert as
    they would alone (module doc). Its `body` replaces the closing `]` of the cached one
    (so the megabytes before it are copied once, by the caller) and `tokens` are theirs."""
    entries = list(
        ContextEntry.objects.filter(session=session, position__gt=last_position)
        .select_related("message")
        .order_by("position")
    )
    messages = [entry_message(entry) for entry in entries]
    if not messages or not continues_openai((last_role, asks_tools), messages[0]):
        return None
    tail = openai_tail(messages)
    added = ", ".join(json.dumps(m, cls=DjangoJSONEncoder) for m in _converted(messages))
    return OpenAIBody(
        body=f", {added}]".encode(),
        tokens=sum(entry.token_count for entry in entries),
        last_position=entries[-1].position,
        open_tail=tail is not None,
        last_role=tail[0] if tail else "",
        asks_tools=bool(tail and tail[1]),
    )


def system_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Leading system messages joined into one prompt (None when there are none)."""
    if not messages:
        return None
    parts: list[str] = []
    for message in messages:
        parts.extend(
            str(block.get("text", ""))
            for block in blocks_of(message)
            if block.get("type") == "text"
        )
    return "\n\n".join(parts)


def _converted(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = to_openai(messages)["messages"]
    return converted
