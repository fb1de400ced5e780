"""The sessions list page: one owner's sessions searched, sorted and paged, with limits.

The search rule, the sorts and the cursor are the selectors' (sessions_app/selectors/
sessions.py), shared with `GET /api/sessions`. Unsearched, the list pages through the
top-level sessions and shows each one's subagent sessions under it; a search lists every
match, subagents naming their parent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from django.db.models import QuerySet

from sessions_app.models import Session
from sessions_app.selectors.cursors import InvalidCursor
from sessions_app.selectors.sessions import DEFAULT_SORT, SORTS, SessionSlice, session_slice
from sessions_app.selectors.subagents import subagents_of, top_level

from .limits import Limits

__all__ = ["PAGE_SIZE", "SORTS", "SessionPage", "SessionRow", "session_page"]

PAGE_SIZE: Final = 25


@dataclass(frozen=True)
class SessionRow:
    """One session with the limits its usage bar is drawn against."""

    session: Session
    limits: Limits
    #: The subagent sessions grouped under this row (an unsearched list only).
    children: list[SessionRow] = field(default_factory=list)

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


def session_page(
    sessions: QuerySet[Session],
    *,
    query: str = "",
    sort: str = DEFAULT_SORT,
    cursor: str = "",
    limit: int = PAGE_SIZE,
    limits: Callable[[Session], Limits],
) -> SessionPage:
    """One page of `sessions` (already the owner's), searched and sorted, each row with its
    `limits` (the view's, from the threshold service). A cursor the page did not issue (an
    old link, a hand-edited URL) opens the first page."""
    grouped = not query.strip()
    sessions = top_level(sessions) if grouped else sessions.select_related("parent")
    found: SessionSlice
    try:
        found = session_slice(sessions, search=query, sort=sort, cursor=cursor, limit=limit)
    except InvalidCursor:
        found = session_slice(sessions, search=query, sort=sort, limit=limit)
    children = subagents_of(found.sessions) if grouped else {}
    return SessionPage(
        rows=[
            SessionRow(
                session,
                limits(session),
                [SessionRow(child, limits(child)) for child in children.get(session.pk, [])],
            )
            for session in found.sessions
        ],
        sort=found.sort,
        query=found.search,
        next_cursor=found.next_cursor,
        is_first=found.is_first,
    )
