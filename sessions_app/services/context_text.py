"""The runtime context as response JSON: assembled once per session state, then cached.

Messages go out as the exporters render them (sessions_app.exporters; docs/exports.md):
roles alternate, and a system message after the first other one is a `<system>` user block
(Anthropic) or stays a system message (OpenAI). A 1M-token context is about 5 MB of JSON.
The Anthropic form is spliced from each entry's stored JSON text (no decode and re-encode)
whenever the stored roles already alternate, as they nearly always do. Either form is kept
in an in-process cache under the session's id and format, stamped with the session's
`context_revision` and `version`. Every change to the entries bumps `version` (appends) or
both (compaction, revert, offload), and each read compares the stamp with the database's
first, so nothing stale is served and each process may keep its own copy. After appends
only (same revision, higher version) the cached Anthropic text is extended with the new
entries, unless they break the alternation, instead of being rebuilt. `limit` and `usage`
depend on the profile, which the admin may change at any time: they are added to every
response, never cached.

In process rather than in Django's cache: a shared cache would move megabytes per read
(the production example uses the database as its cache), where a local hit costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import TextField
from django.db.models.functions import Cast, Coalesce

from compaction import blocks_of

from ..exporters import request_messages, to_openai
from ..models import ContextEntry, Session
from .entries import entry_message, load_entries
from .sized_cache import SizedCache

__all__ = [
    "ContextText",
    "Format",
    "cache_budget",
    "clear_cache",
    "context_text",
    "payload_parts",
    "system_text",
]

Format = Literal["anthropic", "openai"]
#: (context_revision, version) of a session as read from the database.
Stamp = tuple[int, int]
#: (position, role, token_count, content as stored JSON text) of one entry.
Row = tuple[int, str, int, str]
#: Default budget of the cache in each process: a dozen 1M-token contexts.
DEFAULT_BUDGET: Final = 64 * 1024 * 1024


def cache_budget() -> int:
    """Bytes of assembled contexts each process keeps (CTXWEB_CONTEXT_CACHE_BYTES; 0: none)."""
    return int(getattr(settings, "CTXWEB_CONTEXT_CACHE_BYTES", DEFAULT_BUDGET))


@dataclass(frozen=True)
class ContextText:
    """The profile-independent part of a context response and the state it describes.

    `body` is the response up to the messages: Anthropic `{"system":…,"messages":[…` (its
    list still open), OpenAI `json.dumps({system, messages})` without the closing brace.
    `open_tail` (Anthropic): the list holds a non-system message, so appended entries can
    only extend the list, never the system prompt; `last_role` is the role of its last
    message (an appended entry of the same role cannot simply be spliced after it).
    """

    revision: int
    version: int
    last_position: int
    tokens: int
    body: bytes
    open_tail: bool
    last_role: str = ""

    @property
    def stamp(self) -> Stamp:
        """(context_revision, version) of the state this text describes."""
        return self.revision, self.version


_cache: SizedCache[ContextText] = SizedCache(cache_budget, lambda text: len(text.body))


def clear_cache() -> None:
    """Forget every assembled context of this process."""
    _cache.clear()


def context_text(session: Session, fmt: Format) -> ContextText:
    """The assembled context of `session` as the database holds it now (cached)."""
    key = (session.pk, fmt)
    stamp = _stamp(session)
    if stamp is None:  # deleted meanwhile: nothing worth caching
        return _built(session, fmt, (0, 0))
    cached = _cache.get(key)
    if cached is not None and cached.stamp == stamp:
        return cached
    if cached is not None and _appended_only(cached, stamp):
        extended = _extended(cached, session, stamp)
        after = _stamp(session)
        if extended is not None and after == stamp:
            _cache.put(key, extended)
            return extended
        if extended is not None and after is not None and after[0] == stamp[0]:
            return extended  # more appends meanwhile: right for now, but not for `stamp`
        # Otherwise entries were replaced meanwhile: one full query is a consistent view.
    built = _built(session, fmt, stamp)
    if _stamp(session) == stamp:
        _cache.put(key, built)
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
    if fmt == "openai":
        return system, to_openai(messages)["messages"], tokens
    return system, request_messages(messages)[1], tokens


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
    listed, last_role = _listed(rows[head:], after="")
    return ContextText(
        *stamp,
        last_position=rows[-1][0] if rows else -1,
        tokens=sum(row[2] for row in rows),
        body=f'{{"system":{json.dumps(system)},"messages":[{listed}'.encode(),
        open_tail=head < len(rows),
        last_role=last_role,
    )


def _extended(cached: ContextText, session: Session, stamp: Stamp) -> ContextText | None:
    """The cached Anthropic text with the entries appended since (None: nothing new found,
    or the new entries do not simply continue the alternation)."""
    rows = _raw_rows(session, after=cached.last_position)
    if not rows or not _alternating(rows, after=cached.last_role):
        return None
    return ContextText(
        *stamp,
        last_position=rows[-1][0],
        tokens=cached.tokens + sum(row[2] for row in rows),
        body=cached.body + f",{_joined(rows)}".encode(),
        open_tail=True,
        last_role=rows[-1][1],
    )


def _listed(rows: Sequence[Row], *, after: str) -> tuple[str, str]:
    """(the messages of `rows` as JSON list items, the last one's role).

    Spliced from the stored JSON when the roles alternate and hold no system message;
    otherwise decoded and rendered as the Anthropic exporter does.
    """
    if _alternating(rows, after=after):
        return _joined(rows), rows[-1][1] if rows else after
    decoded = [{"role": role, "content": json.loads(content)} for _, role, _, content in rows]
    rendered = request_messages(decoded)[1]
    listed = ",".join(json.dumps(message, cls=DjangoJSONEncoder) for message in rendered)
    return listed, str(rendered[-1]["role"]) if rendered else after


def _alternating(rows: Sequence[Row], *, after: str) -> bool:
    """True when no row is a system message and no row has the role of the one before."""
    previous = after
    for _, role, _, _ in rows:
        if role == "system" or role == previous:
            return False
        previous = role
    return True


def _raw_rows(session: Session, *, after: int | None = None) -> list[Row]:
    """(position, role, token_count, content as stored JSON text) of the entries, in order."""
    raw = Cast(Coalesce("content", "message__content"), output_field=TextField())
    entries = ContextEntry.objects.filter(session=session)
    if after is not None:
        entries = entries.filter(position__gt=after)
    return list(entries.order_by("position").values_list("position", "role", "token_count", raw))


def _joined(rows: Sequence[Row]) -> str:
    roles = {role: json.dumps(role) for role in {row[1] for row in rows}}
    return ",".join(f'{{"role":{roles[role]},"content":{content}}}' for _, role, _, content in rows)
