"""The sessions list: search, sort and keyset (cursor) pagination over one owner's sessions."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from sessions_app.models import Session

from .limits import Limits, LimitsResolver

__all__ = ["PAGE_SIZE", "SORTS", "SessionPage", "SessionRow", "session_page"]

PAGE_SIZE: Final = 25


@dataclass(frozen=True)
class Sort:
    """One way to order the list: a field and a direction."""

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
class SessionRow:
    """One session with the limits its usage bar is drawn against."""

    session: Session
    limits: Limits

    @property
    def usage(self) -> float:
        """Runtime tokens as a fraction of the context limit."""
        return self.limits.usage(self.session.context_tokens)


@dataclass(frozen=True)
class SessionPage:
    """One page of the list and the cursor of the next."""

    rows: list[SessionRow]
    sort: str
    query: str
    next_cursor: str | None
    is_first: bool


def _encode(value: Any, pk: Any) -> str:
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps([value, str(pk)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str, sort: Sort) -> tuple[Any, str] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value, pk = json.loads(raw)
    except (ValueError, binascii.Error, TypeError):
        return None
    if sort.field.endswith("_at"):
        value = parse_datetime(value) if isinstance(value, str) else None
        if value is None:
            return None
    elif sort.field == "title":
        if not isinstance(value, str):
            return None
    elif not isinstance(value, int):
        return None
    return value, str(pk)


def _after(sort: Sort, value: Any, pk: str) -> Q:
    op = "lt" if sort.descending else "gt"
    return Q(**{f"{sort.field}__{op}": value}) | Q(**{sort.field: value, f"pk__{op}": pk})


def search(queryset: QuerySet[Session], query: str) -> QuerySet[Session]:
    """Sessions whose title, model, source format or external id contain every word."""
    for word in query.split():
        queryset = queryset.filter(
            Q(title__icontains=word)
            | Q(model__icontains=word)
            | Q(source_format__icontains=word)
            | Q(external_id__icontains=word)
        )
    return queryset


def session_page(
    queryset: QuerySet[Session],
    *,
    query: str = "",
    sort: str = DEFAULT_SORT,
    cursor: str = "",
    limit: int = PAGE_SIZE,
) -> SessionPage:
    """One page of `queryset` (already the owner's sessions), searched and sorted."""
    sort = sort if sort in SORTS else DEFAULT_SORT
    order = SORTS[sort]
    rows = search(queryset, query.strip()).select_related("profile")
    decoded = _decode(cursor, order) if cursor else None
    if decoded is not None:
        rows = rows.filter(_after(order, *decoded))
    prefix = "-" if order.descending else ""
    page = list(rows.order_by(f"{prefix}{order.field}", f"{prefix}pk")[: limit + 1])
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        last = page[-1]
        next_cursor = _encode(getattr(last, order.field), last.pk)
    resolve = LimitsResolver()
    return SessionPage(
        rows=[SessionRow(session, resolve(session)) for session in page],
        sort=sort,
        query=query.strip(),
        next_cursor=next_cursor,
        is_first=decoded is None,
    )
