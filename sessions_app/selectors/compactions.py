"""A session's compactions: one by number, pages of them, the log, and the marker tree."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Max

from sessions_app.compaction_tree import CompactionTree
from sessions_app.models import Compaction, Session
from sessions_app.services.errors import NotFound

from .cursors import cursor_value, decode_cursor, encode_cursor

__all__ = [
    "CompactionPage",
    "compaction_links",
    "compaction_log",
    "compaction_page",
    "compaction_tree",
    "drawn_compactions",
    "newest_compaction_number",
    "session_compaction",
    "session_compactions",
]


@dataclass(frozen=True)
class CompactionPage:
    """Compactions oldest first, and the cursor of the next page (or None)."""

    items: list[Compaction]
    next_cursor: str | None


def session_compaction(session: Session, number: int) -> Compaction:
    """Compaction `number` of `session` (the session already the caller's); NotFound."""
    compaction = (
        Compaction.objects.select_related("session").filter(session=session, number=number).first()
    )
    if compaction is None:
        raise NotFound(f"no compaction #{number}")
    return compaction


def session_compactions(session: Session) -> list[Compaction]:
    """Every compaction of `session` (failed and reverted too), oldest first."""
    return list(Compaction.objects.filter(session=session).order_by("number"))


def compaction_log(session: Session) -> list[Compaction]:
    """Every compaction of `session`, newest first, with its parent (the compaction log)."""
    return list(
        Compaction.objects.filter(session=session).select_related("parent").order_by("-number")
    )


def newest_compaction_number(session: Session) -> int:
    """The number of the session's newest compaction, failed ones included (0: none)."""
    newest = Compaction.objects.filter(session=session).aggregate(top=Max("number"))["top"]
    return int(newest or 0)


def drawn_compactions(session: Session) -> list[Compaction]:
    """The compactions a token timeline draws (succeeded and reverted), oldest first."""
    return list(
        Compaction.objects.filter(session=session)
        .exclude(status=Compaction.Status.FAILED)
        .order_by("number")
    )


def compaction_tree(session: Session) -> CompactionTree:
    """The marker tree of `session` (sessions_app/compaction_tree.py)."""
    return CompactionTree(session_compactions(session))


def compaction_links(session_id: uuid.UUID) -> list[Compaction]:
    """Every compaction of a session with only its pk, number and parent (for parent and
    children numbers)."""
    return list(Compaction.objects.filter(session_id=session_id).only("pk", "number", "parent_id"))


def compaction_page(
    session: Session, *, status: str | None = None, cursor: str | None = None, limit: int = 50
) -> CompactionPage:
    """Compactions of `session` oldest first (only `status` ones when given), after
    `cursor`; InvalidCursor for a cursor this app did not issue."""
    rows = Compaction.objects.filter(session=session).order_by("number")
    if status:
        rows = rows.filter(status=status)
    position = decode_cursor(cursor)
    if position is not None:
        rows = rows.filter(number__gt=cursor_value(position, "n", int))
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return CompactionPage(
        items=page, next_cursor=encode_cursor({"n": page[-1].number}) if more else None
    )
