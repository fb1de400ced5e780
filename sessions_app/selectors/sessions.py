"""The caller's sessions: one owner-scoped lookup, the one search rule, sorted keyset pages.

The API's `GET /api/sessions` and the sessions list page both page through
`session_slice` (same search, same cursor codec); the page offers several sorts, the API
the default one (latest activity first).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from sessions_app.models import Session
from sessions_app.services.errors import NotFound
from sessions_app.services.sessions.lifecycle import sessions_for

from .cursors import InvalidCursor, cursor_value, decode_cursor, encode_cursor

__all__ = [
    "DEFAULT_SORT",
    "SORTS",
    "SessionSlice",
    "Sort",
    "owned_session",
    "owned_sessions",
    "search_sessions",
    "session_slice",
]

Owner = AbstractBaseUser | AnonymousUser | None


@dataclass(frozen=True)
class Sort:
    """One way to order the list: a label, a field and a direction (ties: by id, likewise)."""

    label: str
    field: str
    descending: bool


SORTS: Final[dict[str, Sort]] = {
    "recent": Sort("Last activity", "updated_at", True),
    "created": Sort("Newest", "created_at", True),
    "title": Sort("Title", "title", False),
    "tokens": Sort("History tokens", "history_tokens", True),
    "context": Sort("Runtime tokens", "context_tokens", True),
    "messages": Sort("Messages", "message_count", True),
    "compactions": Sort("Compactions", "compaction_count", True),
}
DEFAULT_SORT: Final = "recent"


@dataclass(frozen=True)
class SessionSlice:
    """One page of sessions, how it was chosen, and the cursor of the next page (or None)."""

    sessions: list[Session]
    sort: str
    search: str
    next_cursor: str | None
    is_first: bool


def owned_sessions(user: Owner) -> QuerySet[Session]:
    """The sessions `user` may see: their own (the one isolation rule)."""
    return sessions_for(user)


def owned_session(user: Owner, session_id: uuid.UUID | str) -> Session:
    """`user`'s session `session_id` with its profile; NotFound when malformed, missing
    or someone else's."""
    try:
        key = session_id if isinstance(session_id, uuid.UUID) else uuid.UUID(str(session_id))
    except ValueError:
        raise NotFound("no such session") from None
    session = owned_sessions(user).select_related("profile").filter(pk=key).first()
    if session is None:
        raise NotFound("no such session")
    return session


def search_sessions(sessions: QuerySet[Session], text: str) -> QuerySet[Session]:
    """The one search rule: sessions whose title, model, source format or external id
    contain every word of `text` (case-insensitive); all of them for a blank `text`."""
    for word in text.split():
        sessions = sessions.filter(
            Q(title__icontains=word)
            | Q(model__icontains=word)
            | Q(source_format__icontains=word)
            | Q(external_id__icontains=word)
        )
    return sessions


def _key(session: Session, sort: str) -> Any:
    value = getattr(session, SORTS[sort].field)
    return value.isoformat() if isinstance(value, datetime) else value


def _position(cursor: str, sort: str) -> tuple[Any, str]:
    """The (sort value, id) a cursor of `sort` points after; InvalidCursor otherwise."""
    position = decode_cursor(cursor) or {}
    if position.get("s") != sort:
        raise InvalidCursor()
    last_id = cursor_value(position, "id", str)
    field = SORTS[sort].field
    if field.endswith("_at"):
        value: Any = parse_datetime(cursor_value(position, "v", str))
        if value is None:
            raise InvalidCursor()
    elif field == "title":
        value = cursor_value(position, "v", str)
    else:
        value = cursor_value(position, "v", int)
    try:
        uuid.UUID(last_id)
    except ValueError:
        raise InvalidCursor() from None
    return value, last_id


def _after(sort: Sort, value: Any, last_id: str) -> Q:
    op = "lt" if sort.descending else "gt"
    return Q(**{f"{sort.field}__{op}": value}) | Q(**{sort.field: value, f"pk__{op}": last_id})


def session_slice(
    sessions: QuerySet[Session],
    *,
    search: str = "",
    sort: str = DEFAULT_SORT,
    cursor: str | None = None,
    limit: int = 50,
) -> SessionSlice:
    """A page of `sessions` (already one owner's): searched, sorted (an unknown sort is the
    default), after `cursor`; InvalidCursor for a cursor not issued for this sort."""
    sort = sort if sort in SORTS else DEFAULT_SORT
    order = SORTS[sort]
    rows = search_sessions(sessions, search).select_related("profile")
    if cursor:
        rows = rows.filter(_after(order, *_position(cursor, sort)))
    prefix = "-" if order.descending else ""
    page = list(rows.order_by(f"{prefix}{order.field}", f"{prefix}pk")[: limit + 1])
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        last = page[-1]
        next_cursor = encode_cursor({"s": sort, "v": _key(last, sort), "id": str(last.pk)})
    return SessionSlice(
        sessions=page,
        sort=sort,
        search=search.strip(),
        next_cursor=next_cursor,
        is_first=not cursor,
    )
