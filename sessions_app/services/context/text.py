"""The runtime context as response JSON: assembled once per session state, then cached.

Messages go out as the exporters render them (sessions_app.exporters; docs/exports.md):
roles alternate, and a system message after the first other one is a `<system>` user block
(Anthropic) or stays a system message (OpenAI). A 1M-token context is about 5 MB of JSON.
The Anthropic form is spliced from each entry's stored JSON text (no decode and re-encode)
whenever the stored roles already alternate, as they nearly always do. Either form is kept
in an in-process cache under the session's id and format, stamped with the session's
`context_revision` and `version`. Every change to the entries bumps `version` (appends) or
both (compaction, revert, offload, a merge that updated messages in place), and each read
compares the stamp with the database's first, so nothing stale is served and each process
may keep its own copy. After appends only (same revision, higher version) the cached
text is extended with the new entries instead of being rebuilt, unless they break the
alternation (Anthropic) or would change how the last message converts (OpenAI:
services/context/openai.py). `limit` and `usage` depend on the profile, which the admin may
change at any time, and `tokens` counts a proxied session's system prompt and tools
(services/sessions/overhead.py), which the proxy may change without a new version: both are read
on every request and the cached response holds the tail it was last served with, so a
repeated read returns the cached bytes and a changed limit or overhead rewrites the tail.

In process rather than in Django's cache: a shared cache would move megabytes per read
(the production example uses the database as its cache), where a local hit costs nothing.
Each response built is also written to a file (services/context/store.py), so a process
without a usable copy (none, or one of an older revision) reads it instead of rebuilding
it, with the same stamp check. For a change that replaces entries, `sessions/state.advance`
asks for `refresh_after_commit`: once committed, the writer rebuilds the file (only for the
formats someone read), so the first read after a compaction, revert or offload, in any
process sharing the store, finds it ready.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, get_args

from django.conf import settings
from django.db import DatabaseError, transaction

from sessions_app.exporters import request_messages, to_openai, to_responses
from sessions_app.models import ContextEntry, Session
from sessions_app.services.context import store as context_store
from sessions_app.services.context.openai import (
    OpenAIBody,
    openai_body,
    openai_extended,
    system_text,
)
from sessions_app.services.context.responses import responses_body
from sessions_app.services.context.rows import alternating, joined_rows, listed_rows, raw_rows
from sessions_app.services.context.sized_cache import SizedCache
from sessions_app.services.sessions.entries import entry_message

__all__ = [
    "ContextText",
    "Format",
    "cache_budget",
    "clear_cache",
    "context_text",
    "payload_parts",
    "refresh_after_commit",
    "response_tail",
    "system_text",
]

logger = logging.getLogger("sessions_app")

Format = Literal["anthropic", "openai", "responses"]
#: (context_revision, version) of a session as read from the database.
Stamp = tuple[int, int]
#: Default budget of the cache in each process: a dozen 1M-token contexts.
DEFAULT_BUDGET: Final = 64 * 1024 * 1024


def cache_budget() -> int:
    """Bytes of assembled contexts each process keeps (CTXWEB_CONTEXT_CACHE_BYTES; 0: none)."""
    return int(getattr(settings, "CTXWEB_CONTEXT_CACHE_BYTES", DEFAULT_BUDGET))


@dataclass(frozen=True)
class ContextText:
    """A whole context response for one `limit` and `overhead`, and the state it describes.

    `data[:split]` is the profile-independent part: Anthropic `{"system":…,"messages":[…`
    (its list still open), OpenAI `json.dumps({system, messages})` without the closing
    brace; the rest is the tail `tokens` (the entries' `tokens` plus `overhead`, a proxied
    session's system prompt and tools), `limit` and `usage`, so a repeated read returns
    `data` as it is. `open_tail`: the list holds a non-system message, so appended entries
    can only extend the list, never the system prompt (OpenAI: and no system message waits
    at its end for a tool call's answer); `last_role` is the role of its last message (an
    appended entry of the same role cannot simply be spliced after it); `asks_tools`
    (OpenAI): that message calls tools (a system message after it is moved).
    """

    revision: int
    version: int
    last_position: int
    tokens: int
    data: bytes
    split: int
    limit: int | None
    fmt: Format
    open_tail: bool
    last_role: str = ""
    overhead: int = 0
    asks_tools: bool = False

    @property
    def stamp(self) -> Stamp:
        """(context_revision, version) of the state this text describes."""
        return self.revision, self.version

    @property
    def body(self) -> memoryview:
        """The profile-independent part of `data` (no copy)."""
        return memoryview(self.data)[: self.split]

    def with_tail(self, limit: int | None, overhead: int) -> ContextText:
        """This text with the tail of `limit` and `overhead` (itself when it has it already)."""
        if limit == self.limit and overhead == self.overhead:
            return self
        tail = response_tail(self.fmt, self.tokens + overhead, limit)
        return replace(self, data=b"".join((self.body, tail)), limit=limit, overhead=overhead)


_cache: SizedCache[ContextText] = SizedCache(cache_budget, lambda text: len(text.data))


def clear_cache(*, stored: bool = True) -> None:
    """Forget every assembled context of this process (and the stored files: `stored`)."""
    _cache.clear()
    if stored:
        context_store.clear()


def context_text(
    session: Session,
    fmt: Format,
    limit: int | None,
    *,
    stamp: Stamp | None = None,
    overhead: int = 0,
) -> ContextText:
    """The context response of `session` for `limit` as the database holds it now (cached).

    `stamp`: the session's (context_revision, version) when the caller has just read them
    (the API reads the session row anyway); otherwise they are read here. `overhead`: the
    tokens the response counts besides the entries (a proxied session's system and tools).
    """
    key = (session.pk, fmt)
    stamp = stamp or _stamp(session)
    if stamp is None:  # deleted meanwhile: nothing worth caching
        return _built(session, fmt, (0, 0), limit, overhead)
    cached = _cache.get(key)
    if cached is not None and cached.stamp == stamp:
        found = cached.with_tail(limit, overhead)
        if found is not cached:
            _cache.put(key, found)
        return found
    loaded = False
    if (cached is None or not _appended_only(cached, stamp)) and cache_budget() > 0:
        # Nothing usable in memory (none, or an older revision): another process may have
        # stored this state (a writer refreshes it after replacing entries) or an older one.
        stored = _stored(session, fmt)
        if stored is not None and (stored.stamp == stamp or _appended_only(stored, stamp)):
            cached, loaded = stored, True
    if cached is not None and cached.stamp == stamp:
        return _keep(session, key, cached.with_tail(limit, overhead), stored=False)
    if cached is not None and _appended_only(cached, stamp):
        extended = _extended(cached, session, stamp, limit, overhead)
        after = _stamp(session)
        if extended is not None and after == stamp:
            return _keep(session, key, extended, stored=loaded)
        if extended is not None and after is not None and after[0] == stamp[0]:
            return extended  # more appends meanwhile: right for now, but not for `stamp`
        # Otherwise entries were replaced meanwhile: one full query is a consistent view.
    built = _built(session, fmt, stamp, limit, overhead)
    if _stamp(session) == stamp:
        _keep(session, key, built, stored=True)
    return built


def refresh_after_commit(session_id: Any) -> None:
    """Once the current transaction commits, rebuild the stored responses of `session_id`.

    For a change that replaced entries (compaction, revert, offload): the writer builds the
    new state once, so the first read after it, in any process sharing the store, needn't.
    Only the formats someone read (kept in memory or stored) are built; a failure only
    costs the reader a build.
    """

    def refresh() -> None:  # a function, not a partial: Django logs its __qualname__
        _refresh(session_id)

    transaction.on_commit(refresh, robust=True)  # a failure never fails the write


def _refresh(session_id: Any) -> None:
    if cache_budget() <= 0:
        return
    session = Session(pk=session_id)
    try:
        stamp = _stamp(session)
        for fmt in get_args(Format):
            tail = _last_tail(session_id, fmt)  # None: nobody read this format
            if stamp is None or tail is None or tail[0] == stamp:
                continue
            built = _built(session, fmt, stamp, tail[1], tail[2])
            if _stamp(session) == stamp:
                _keep(session, (session_id, fmt), built, stored=True)
    except (DatabaseError, OSError) as error:
        logger.warning("context: cannot refresh the stored response of %s: %s", session_id, error)


def _last_tail(session_id: Any, fmt: Format) -> tuple[Stamp, int | None, int] | None:
    """(stamp, limit, overhead) of the copy in memory, else of the stored one, or None."""
    cached = _cache.get((session_id, fmt))
    if cached is not None:
        return cached.stamp, cached.limit, cached.overhead
    header = context_store.header(str(session_id), fmt)
    if header is None:
        return None
    try:
        limit = None if header["limit"] is None else int(header["limit"])
        stamp = (int(header["revision"]), int(header["version"]))
        return stamp, limit, int(header.get("overhead") or 0)
    except (KeyError, TypeError, ValueError):
        return None


def _keep(
    session: Session, key: tuple[Any, Format], text: ContextText, *, stored: bool
) -> ContextText:
    """Cache `text` in this process (and in the store: `stored`); return it."""
    _cache.put(key, text)
    if stored and len(text.data) <= cache_budget():  # the store keeps what the cache may
        header = {name: getattr(text, name) for name in _HEADER}
        context_store.save(str(session.pk), text.fmt, header, text.data)
    return text


#: The fields of a ContextText the store keeps in its header (besides `data` and `fmt`).
_HEADER: Final = (
    "revision",
    "version",
    "last_position",
    "tokens",
    "split",
    "limit",
    "open_tail",
    "last_role",
    "overhead",
    "asks_tools",
)


def _stored(session: Session, fmt: Format) -> ContextText | None:
    """The text the store holds for `session` in `fmt`, or None."""
    found = context_store.load(str(session.pk), fmt)
    if found is None:
        return None
    header, data = found
    try:
        return ContextText(
            revision=int(header["revision"]),
            version=int(header["version"]),
            last_position=int(header["last_position"]),
            tokens=int(header["tokens"]),
            data=data,
            split=int(header["split"]),
            limit=None if header["limit"] is None else int(header["limit"]),
            fmt=fmt,
            open_tail=bool(header["open_tail"]),
            last_role=str(header["last_role"]),
            overhead=int(header.get("overhead") or 0),
            asks_tools=bool(header.get("asks_tools")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def response_tail(fmt: Format, tokens: int, limit: int | None) -> bytes:
    """The end of a response: `tokens`, `limit` and `usage` (they depend on the profile)."""
    usage = json.dumps(round(tokens / limit, 6) if limit else None)
    if fmt != "anthropic":  # json.dumps' default separators, as the rest has them
        return f', "tokens": {tokens}, "limit": {json.dumps(limit)}, "usage": {usage}}}'.encode()
    return f'],"tokens":{tokens},"limit":{json.dumps(limit)},"usage":{usage}}}'.encode()


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
    if fmt == "responses":
        return system, to_responses(messages)["input"], tokens
    return system, request_messages(messages)[1], tokens


def _stamp(session: Session) -> Stamp | None:
    row = Session.objects.filter(pk=session.pk).values_list("context_revision", "version").first()
    return (int(row[0]), int(row[1])) if row is not None else None


def _appended_only(cached: ContextText, stamp: Stamp) -> bool:
    return cached.open_tail and cached.revision == stamp[0] and cached.version < stamp[1]


def _built(
    session: Session, fmt: Format, stamp: Stamp, limit: int | None, overhead: int
) -> ContextText:
    if fmt == "openai":
        built = openai_body(session)
        return _openai_text(built, stamp, built.tokens, limit, overhead)
    if fmt == "responses":  # the OpenAI form's shape, rebuilt on change
        built = responses_body(session)
        return _openai_text(built, stamp, built.tokens, limit, overhead, fmt="responses")
    rows = raw_rows(session)
    head = 0
    while head < len(rows) and rows[head][1] == "system":
        head += 1
    system = system_text([{"role": "system", "content": json.loads(r[3])} for r in rows[:head]])
    listed, last_role = listed_rows(rows[head:], after="")
    tokens = sum(row[2] for row in rows)
    tail = response_tail(fmt, tokens + overhead, limit)
    # One encode of the whole response (the tail is ASCII): no copy of megabytes after.
    data = f'{{"system":{json.dumps(system)},"messages":[{listed}{tail.decode()}'.encode()
    return ContextText(
        *stamp,
        last_position=rows[-1][0] if rows else -1,
        tokens=tokens,
        data=data,
        split=len(data) - len(tail),
        limit=limit,
        fmt=fmt,
        open_tail=head < len(rows),
        last_role=last_role,
        overhead=overhead,
    )


def _extended(
    cached: ContextText, session: Session, stamp: Stamp, limit: int | None, overhead: int
) -> ContextText | None:
    """The cached text with the entries appended since (None: nothing new found, or the
    new entries do not simply continue the alternation, or in OpenAI form their conversion)."""
    if cached.fmt == "openai":
        found = openai_extended(
            session,
            last_position=cached.last_position,
            last_role=cached.last_role,
            asks_tools=cached.asks_tools,
        )
        if found is None:
            return None
        tokens = cached.tokens + found.tokens
        return _openai_text(found, stamp, tokens, limit, overhead, before=cached.body[:-1])
    rows = raw_rows(session, after=cached.last_position)
    if not rows or not alternating(rows, after=cached.last_role):
        return None
    tokens = cached.tokens + sum(row[2] for row in rows)
    added = f",{joined_rows(rows)}".encode()
    return ContextText(
        *stamp,
        last_position=rows[-1][0],
        tokens=tokens,
        data=b"".join((cached.body, added, response_tail(cached.fmt, tokens + overhead, limit))),
        split=cached.split + len(added),
        limit=limit,
        fmt=cached.fmt,
        open_tail=True,
        last_role=rows[-1][1],
        overhead=overhead,
    )


def _openai_text(
    built: OpenAIBody,
    stamp: Stamp,
    tokens: int,
    limit: int | None,
    overhead: int,
    *,
    before: memoryview | bytes = b"",
    fmt: Format = "openai",
) -> ContextText:
    """The OpenAI (or Responses) response of `before` then `built` for `tokens` (all the
    entries'), `limit` and `overhead`."""
    tail = response_tail(fmt, tokens + overhead, limit)
    return ContextText(
        *stamp,
        last_position=built.last_position,
        tokens=tokens,
        data=b"".join((before, built.body, tail)),  # one copy of the megabytes
        split=len(before) + len(built.body),
        limit=limit,
        fmt=fmt,
        open_tail=built.open_tail,
        last_role=built.last_role,
        overhead=overhead,
        asks_tools=built.asks_tools,
    )
