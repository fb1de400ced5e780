"""Full-text search over an owner's full histories, archived originals included.

Every message ever stored is a Message row (compaction never deletes one: it replaces
context entries and archives their messages), so the search covers what compactions took
out of the context. The index is the database's own (migration 0015_message_search):
PostgreSQL's full-text search (a GIN index on the messages' strings, 'simple'
configuration) and SQLite's FTS5. Words match whole, case-insensitively, every word of the
query in the same message (`main.py` finds `src/main.py`; SQLite also folds accents and
wants a chunk's words adjacent). Hits are newest first (message time, then id).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    BooleanField,
    DateTimeField,
    ExpressionWrapper,
    F,
    QuerySet,
    Value,
)
from django.db.models.expressions import RawSQL

from sessions_app.models import Compaction, Message, Session
from sessions_app.services.errors import InvalidInput

from .sessions import owned_sessions

__all__ = [
    "MAX_LIMIT",
    "SNIPPET_CHARS",
    "SearchHit",
    "covering_compactions",
    "message_text",
    "search_chunks",
    "search_history",
    "snippet_of",
]

#: Most hits one call returns.
MAX_LIMIT: Final = 100
#: About how long a snippet is (plain text around the first match).
SNIPPET_CHARS: Final = 240
_QUERY_CHARS: Final = 1000

_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
_FTS: Final = "sessions_app_message_search"
#: A query matching at least this many messages is answered from the time index.
_FEW: Final = 2000
#: How many of one session's messages are checked against the FTS5 index at a time.
_BATCH: Final = 500
# The indexed column (migration 0015_message_search) and the query: '.', '/', '@' and ':'
# are spaces on both sides.
_PG_MATCHES: Final = (
    '"sessions_app_message"."search_document" @@ '
    "plainto_tsquery('simple'::regconfig, translate(%s, './@:', '    '))"
)

Owner = AbstractBaseUser | AnonymousUser | None


@dataclass(frozen=True)
class SearchHit:
    """One message that matches: where it is, what covers it, and the text around the match."""

    session_id: str
    session_title: str
    message_index: int
    role: str
    created_at: datetime | None
    compaction: int | None
    snippet: str
    highlights: tuple[tuple[int, int], ...]


def search_history(
    owner: Owner,
    query: str,
    *,
    session: Session | None = None,
    limit: int = 20,
    offset: int = 0,
) -> list[SearchHit]:
    """The messages of `owner`'s sessions (only `session`'s when given) holding every word
    of `query`, newest first; InvalidInput (field `query`, `limit` or `offset`) for a query
    without words or a page out of bounds."""
    chunks = search_chunks(query)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput.field("limit", f"must be between 1 and {MAX_LIMIT}")
    if offset < 0:
        raise InvalidInput.field("offset", "must be 0 or more")
    ids = _page_ids(owner, chunks, session, slice(offset, offset + limit))
    rows = Message.objects.filter(pk__in=ids).select_related("session")
    page = sorted(
        rows.only("session__title", "seq", "role", "created_at", "content"),
        key=lambda row: (row.created_at, row.pk),
        reverse=True,
    )
    covering = covering_compactions(page)
    words = [word for _, chunk_words in chunks for word in chunk_words]
    return [_hit(row, covering.get(row.pk), words) for row in page]


def search_chunks(query: str) -> list[tuple[str, list[str]]]:
    """The space-separated chunks of `query` that hold words, each with its words;
    InvalidInput (field `query`) when there is none or the query is too long."""
    if not isinstance(query, str) or len(query) > _QUERY_CHARS:
        raise InvalidInput.field("query", f"must be text of at most {_QUERY_CHARS} characters")
    clean = query.replace("\x00", " ").encode("utf-8", "ignore").decode("utf-8")
    chunks = [(chunk, words) for chunk in clean.split() if (words := _WORD.findall(chunk))]
    if not chunks:
        raise InvalidInput.field("query", "must hold at least one word")
    return chunks


def _page_ids(
    owner: Owner, chunks: Sequence[tuple[str, list[str]]], session: Session | None, page: slice
) -> list[int]:
    """The ids of one page of the owner's matching messages, newest first."""
    rows: QuerySet[Message] = Message.objects.filter(session__in=owned_sessions(owner))
    if session is not None:
        rows = rows.filter(session_id=session.pk)
    if connection.vendor == "postgresql":
        text = " ".join(chunk for chunk, _ in chunks)
        rows = rows.filter(RawSQL(_PG_MATCHES, [text], output_field=BooleanField()))
        if _pg_few(text):
            # The planner may walk the time index for a word it cannot estimate (a word of
            # one message: 0.9 s over 1M); an order no index gives makes it list the few
            # matches from the GIN index and sort them.
            shifted = ExpressionWrapper(
                F("created_at") + Value(timedelta(0)), output_field=DateTimeField()
            )
            return list(rows.order_by(shifted.desc(), "-id").values_list("pk", flat=True)[page])
    elif connection.vendor == "sqlite":
        # Each chunk one phrase of its words (FTS5 splits `main.py` into main, py).
        phrases = " ".join('"' + " ".join(words) + '"' for _, words in chunks)
        if session is None:
            return _sqlite_page(owner, phrases, page)
        if not _sqlite_few(phrases):
            return _sqlite_session_page(rows, phrases, page)
        ids = RawSQL(f"SELECT rowid FROM {_FTS} WHERE {_FTS} MATCH %s", [phrases])
        rows = rows.filter(pk__in=ids)  # one session's messages, checked against every match
    else:
        raise InvalidInput.field(
            "query", f"full-text search is not available on {connection.vendor}"
        )
    return list(rows.order_by("-created_at", "-id").values_list("pk", flat=True)[page])


def _pg_few(text: str) -> bool:
    """True when fewer than _FEW messages match (counted on the GIN index, at most _FEW)."""
    probe = (
        "SELECT count(*) FROM (SELECT 1 FROM sessions_app_message WHERE "
        f"{_PG_MATCHES} LIMIT {_FEW}) AS found"
    )
    with connection.cursor() as cursor:
        cursor.execute(probe, [text])
        row = cursor.fetchone()
    return row is not None and int(row[0]) < _FEW


def _sqlite_few(phrases: str) -> bool:
    """True when fewer than _FEW messages match: all of them are read and sorted by time."""
    probe = f"SELECT rowid FROM {_FTS} WHERE {_FTS} MATCH %s ORDER BY rowid DESC LIMIT {_FEW}"
    with connection.cursor() as cursor:
        cursor.execute(probe, [phrases])
        return len(cursor.fetchall()) < _FEW


def _sqlite_page(owner: Owner, phrases: str, page: slice) -> list[int]:
    """One page of the owner's matches, newest first. FTS5 lists matches cheaply; finding
    their times is what costs. Few matches: each is looked up and they are sorted (CROSS
    JOIN keeps FTS5 the outer loop). Many: the time index is walked newest first, each
    message checked against the list of matches (built once), until the page is full."""
    try:
        owned, params = owned_sessions(owner).values("pk").query.sql_with_params()
    except EmptyResultSet:  # nobody's sessions
        return []
    matches = f"SELECT rowid FROM {_FTS} WHERE {_FTS} MATCH %s"
    if _sqlite_few(phrases):
        source = f"({matches}) AS f CROSS JOIN sessions_app_message AS m ON m.id = f.rowid WHERE"
    else:
        source = (
            f"sessions_app_message AS m INDEXED BY message_time_id WHERE m.id IN ({matches}) AND"
        )
    sql = (
        f"SELECT m.id FROM {source} m.session_id IN ({owned}) "
        "ORDER BY m.created_at DESC, m.id DESC LIMIT %s OFFSET %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [phrases, *params, page.stop - page.start, page.start])
        return [row[0] for row in cursor.fetchall()]


def _sqlite_session_page(rows: QuerySet[Message], phrases: str, page: slice) -> list[int]:
    """One page of one session's matches of a word many messages hold, newest first: the
    session's messages are read newest first and checked against the FTS5 index a batch at
    a time (`rowid IN (...)`), until the page is full (listing every match costs more)."""
    ordered = list(rows.order_by("-created_at", "-id").values_list("pk", flat=True))
    found: list[int] = []
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), _BATCH):
            batch = ordered[start : start + _BATCH]
            marks = ", ".join(["%s"] * len(batch))
            cursor.execute(
                f"SELECT rowid FROM {_FTS} WHERE {_FTS} MATCH %s AND rowid IN ({marks})",
                [phrases, *batch],
            )
            hits = {row[0] for row in cursor.fetchall()}
            found.extend(pk for pk in batch if pk in hits)
            if len(found) >= page.stop:
                break
    return found[page]


def covering_compactions(rows: Sequence[Message]) -> dict[int, int]:
    """Message pk -> the number of the succeeded compaction whose archived originals hold
    it (the innermost: a later compaction that re-summarized it covers its range too);
    messages in the live context are left out."""
    sessions = {row.session_id for row in rows}
    spans: dict[Any, list[tuple[int, int, int]]] = defaultdict(list)
    points = (
        Compaction.objects.filter(session_id__in=sessions, status=Compaction.Status.SUCCEEDED)
        .points()
        .filter(first_seq__isnull=False, last_seq__isnull=False)
        .values_list("session_id", "number", "first_seq", "last_seq")
    )
    for session_id, number, first, last in points:
        spans[session_id].append((number, int(first or 0), int(last or 0)))
    covering: dict[int, int] = {}
    for row in rows:
        holding = [s for s in spans.get(row.session_id, ()) if s[1] <= row.seq <= s[2]]
        if holding:
            covering[row.pk] = min(holding, key=lambda s: (s[2] - s[1], s[0]))[0]
    return covering


def _hit(row: Message, compaction: int | None, words: Sequence[str]) -> SearchHit:
    snippet, highlights = snippet_of(message_text(row.content), words)
    return SearchHit(
        session_id=str(row.session_id),
        session_title=row.session.title,
        message_index=row.seq,
        role=row.role,
        created_at=row.created_at,
        compaction=compaction,
        snippet=snippet,
        highlights=highlights,
    )


def message_text(content: Any) -> str:
    """A message's content as plain text: its texts, a tool call as `name {input}`, a tool
    result's content; other blocks by their strings."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return _block_text(content)
    if isinstance(content, list):
        return "\n".join(text for item in content if (text := message_text(item)))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if isinstance(block.get("text"), str):
        return str(block["text"])
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
        return f"{block.get('name', '')} {arguments}"
    if kind == "tool_result":
        return message_text(block.get("content"))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    strings = [value for key, value in block.items() if key != "type" and isinstance(value, str)]
    return " ".join(strings)


def snippet_of(text: str, words: Sequence[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """About SNIPPET_CHARS of `text` (whitespace runs as one space) around the first
    whole-word match of `words` (case-insensitive), with the matches' offsets in it."""
    flat = _SPACE.sub(" ", text).strip()
    longest_first = sorted(set(words), key=len, reverse=True)
    alternatives = "|".join(re.escape(word) for word in longest_first)
    pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)
    first = pattern.search(flat)
    start = max(0, (first.start() if first else 0) - SNIPPET_CHARS // 3)
    end = min(len(flat), start + SNIPPET_CHARS)
    start = max(0, min(start, end - SNIPPET_CHARS))
    prefix = "…" if start > 0 else ""
    snippet = prefix + flat[start:end] + ("…" if end < len(flat) else "")
    body = slice(len(prefix), len(prefix) + end - start)
    highlights = tuple(
        (m.start(), m.end()) for m in pattern.finditer(snippet, body.start, body.stop)
    )
    return snippet, highlights
