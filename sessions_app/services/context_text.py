"""The runtime context as response JSON: assembled once per session state, then cached.

A 1M-token context is about 5 MB of JSON. The Anthropic form is spliced from each entry's
stored JSON text (no decode and re-encode); either form is cached in Django's cache under
the session's id and format, stamped with the session's `version` and `context_revision`.
Every change to the entries bumps `version` (appends) or both (compaction, revert,
offload), so a stamp that differs from the database's is a miss and nothing stale is
served. After appends only (same revision, higher version) the cached Anthropic text is
extended with the new entries instead of being rebuilt. `limit` and `usage` depend on the
profile, which the admin may change at any time: they are added to every response, never
cached.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.conf import settings
from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import TextField
from django.db.models.functions import Cast, Coalesce

from compaction.messages import blocks_of

from ..models import ContextEntry, Session
from .entries import entry_message, load_entries
from .openai_format import openai_messages

__all__ = ["ContextText", "Format", "cache_seconds", "context_text", "payload_parts", "system_text"]

logger = logging.getLogger("sessions_app")

Format = Literal["anthropic", "openai"]
#: Part of every cache key: bump it when the cached tuple's layout changes.
_LAYOUT: Final = 1
#: (context_revision, version) of a session as read from the database.
Stamp = tuple[int, int]


def cache_seconds() -> int:
    """How long an assembled context stays cached (CTXWEB_CONTEXT_CACHE_SECONDS, 600; 0: off).

    A stale entry is never served (the stamp decides); the timeout only bounds how long
    the memory of an idle session's context is held.
    """
    return int(getattr(settings, "CTXWEB_CONTEXT_CACHE_SECONDS", 600))


@dataclass(frozen=True)
class ContextText:
    """The profile-independent part of a context response and the state it describes.

    `body` is the response up to the messages: Anthropic `{"system":…,"messages":[…` (its
    list still open), OpenAI `json.dumps({system, messages})` without the closing brace.
    `open_tail` (Anthropic): the list holds a non-system message, so appended entries can
    only extend the list, never the system prompt.
    """

    revision: int
    version: int
    last_position: int
    tokens: int
    body: bytes
    open_tail: bool

    @property
    def stamp(self) -> Stamp:
        """(context_revision, version) of the state this text describes."""
        return self.revision, self.version

    def as_tuple(self) -> tuple[int, int, int, int, bytes, bool]:
        """The fields in order (cached as a plain tuple: no class to unpickle)."""
        return (
            self.revision,
            self.version,
            self.last_position,
            self.tokens,
            self.body,
            self.open_tail,
        )


def context_text(session: Session, fmt: Format) -> ContextText:
    """The assembled context of `session` as the database holds it now (cached)."""
    key = f"ctxweb:context:{_LAYOUT}:{session.pk}:{fmt}"
    stamp = _stamp(session)
    if stamp is None:  # deleted meanwhile: nothing worth caching
        return _built(session, fmt, (0, 0))
    cached = _cache_get(key)
    if cached is not None and cached.stamp == stamp:
        return cached
    if cached is not None and _appended_only(cached, stamp):
        extended = _extended(cached, session, stamp)
        after = _stamp(session)
        if extended is not None and after == stamp:
            _cache_set(key, extended)
            return extended
        if extended is not None and after is not None and after[0] == stamp[0]:
            return extended  # more appends meanwhile: right for now, but not for `stamp`
        # Otherwise entries were replaced meanwhile: one full query is a consistent view.
    built = _built(session, fmt, stamp)
    if _stamp(session) == stamp:
        _cache_set(key, built)
    return built


def payload_parts(
    entries: Sequence[ContextEntry], fmt: Format
) -> tuple[str | None, list[dict[str, Any]], int]:
    """(system, messages, tokens) of the context payload for these entries."""
    tokens = sum(entry.token_count for entry in entries)
    messages = [entry_message(entry) for entry in entries]
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    system = system_text(messages[:head])
    body = [{"role": m["role"], "content": m["content"]} for m in messages[head:]]
    return system, (openai_messages(system, body) if fmt == "openai" else body), tokens


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


def _stamp(session: Session) -> Stamp | None:
    row = Session.objects.filter(pk=session.pk).values_list("context_revision", "version").first()
    return (int(row[0]), int(row[1])) if row is not None else None


def _appended_only(cached: ContextText, stamp: Stamp) -> bool:
    return cached.open_tail and cached.revision == stamp[0] and cached.version < stamp[1]


def _built(session: Session, fmt: Format, stamp: Stamp) -> ContextText:
    if fmt == "openai":
        entries = load_entries(session)
        system, messages, tokens = payload_parts(entries, fmt)
        text = json.dumps({"system": system, "messages": messages}, cls=DjangoJSONEncoder)
        return ContextText(
            *stamp,
            last_position=entries[-1].position if entries else -1,
            tokens=tokens,
            body=text[:-1].encode(),
            open_tail=False,
        )
    rows = _raw_rows(session)
    head = 0
    while head < len(rows) and rows[head][1] == "system":
        head += 1
    system = system_text([{"role": "system", "content": json.loads(r[3])} for r in rows[:head]])
    body = f'{{"system":{json.dumps(system)},"messages":[{_joined(rows[head:])}'
    return ContextText(
        *stamp,
        last_position=rows[-1][0] if rows else -1,
        tokens=sum(row[2] for row in rows),
        body=body.encode(),
        open_tail=head < len(rows),
    )


def _extended(cached: ContextText, session: Session, stamp: Stamp) -> ContextText | None:
    """The cached Anthropic text with the entries appended since (None: nothing new found)."""
    rows = _raw_rows(session, after=cached.last_position)
    if not rows:
        return None
    return ContextText(
        *stamp,
        last_position=rows[-1][0],
        tokens=cached.tokens + sum(row[2] for row in rows),
        body=cached.body + f",{_joined(rows)}".encode(),
        open_tail=True,
    )


def _raw_rows(session: Session, *, after: int | None = None) -> list[tuple[int, str, int, str]]:
    """(position, role, token_count, content as stored JSON text) of the entries, in order."""
    raw = Cast(Coalesce("content", "message__content"), output_field=TextField())
    entries = ContextEntry.objects.filter(session=session)
    if after is not None:
        entries = entries.filter(position__gt=after)
    return list(entries.order_by("position").values_list("position", "role", "token_count", raw))


def _joined(rows: Sequence[tuple[int, str, int, str]]) -> str:
    roles = {role: json.dumps(role) for role in {row[1] for row in rows}}
    return ",".join(f'{{"role":{roles[role]},"content":{content}}}' for _, role, _, content in rows)


def _cache_get(key: str) -> ContextText | None:
    if cache_seconds() <= 0:
        return None
    try:
        value = cache.get(key)
        return ContextText(*value) if isinstance(value, tuple) else None
    except Exception:  # a cache outage or an unreadable value: build instead
        logger.warning("context cache read failed", exc_info=True, extra={"key": key})
        return None


def _cache_set(key: str, text: ContextText) -> None:
    seconds = cache_seconds()
    if seconds <= 0:
        return
    try:
        cache.set(key, text.as_tuple(), seconds)
    except Exception:
        logger.warning("context cache write failed", exc_info=True, extra={"key": key})
