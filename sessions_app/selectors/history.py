"""Messages of a session's full history: one, a range, a page, and the levels of its tree."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q, QuerySet

from sessions_app.models import Compaction, Message, Session
from sessions_app.services.errors import NotFound

from .cursors import cursor_value, decode_cursor, encode_cursor
from .entries import in_context_message_ids

__all__ = [
    "HistoryLevel",
    "HistoryPage",
    "MessageRun",
    "first_seq_after",
    "history_page",
    "message_at",
    "message_range",
    "message_times",
    "message_tokens",
]


@dataclass(frozen=True)
class HistoryPage:
    """Messages by seq, which of them are in the runtime context, and the next cursor."""

    messages: list[Message]
    in_context: frozenset[int]
    next_cursor: str | None


@dataclass(frozen=True)
class MessageRun:
    """How many messages lie between two bounds, and the first and last seq of them."""

    count: int
    first_seq: int
    last_seq: int


def message_at(session: Session, seq: int) -> Message:
    """Message `seq` of `session`; NotFound when there is none."""
    message = Message.objects.filter(session=session, seq=seq).first()
    if message is None:
        raise NotFound(f"no message {seq}")
    return message


def message_range(
    session: Session, first: int, last: int, *, limit: int
) -> tuple[list[Message], bool]:
    """Messages `first`..`last` by seq (at most `limit`), and whether more were left out."""
    rows = list(
        Message.objects.filter(session=session, seq__gte=first, seq__lte=last).order_by("seq")[
            : limit + 1
        ]
    )
    return rows[:limit], len(rows) > limit


def history_page(session: Session, *, cursor: str | None, limit: int) -> HistoryPage:
    """`limit` messages by seq after `cursor`; InvalidCursor for one this app did not issue."""
    position = decode_cursor(cursor)
    after = cursor_value(position, "seq", int) if position is not None else -1
    rows = list(Message.objects.filter(session=session, seq__gt=after).order_by("seq")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return HistoryPage(
        messages=rows,
        in_context=frozenset(in_context_message_ids(session, [r.pk for r in rows])),
        next_cursor=encode_cursor({"seq": rows[-1].seq}) if more else None,
    )


def message_tokens(session: Session) -> list[tuple[int, int]]:
    """(seq, token count) of every message, by seq."""
    rows = Message.objects.filter(session=session).order_by("seq")
    return list(rows.values_list("seq", "token_count"))


def message_times(session: Session) -> list[tuple[datetime, int]]:
    """(created_at, seq) of every message, by seq."""
    rows = Message.objects.filter(session=session).order_by("seq")
    return list(rows.values_list("created_at", "seq"))


def first_seq_after(session: Session, when: datetime) -> int | None:
    """The seq of the first message created after `when` (None: none was)."""
    rows = Message.objects.filter(session=session, created_at__gt=when).order_by("seq")
    seq: int | None = rows.values_list("seq", flat=True).first()
    return seq


class HistoryLevel:
    """The messages drawn at one level of the compaction tree: the parent's range (the
    whole history at the top) minus the ranges of its children.

    Bounds `lo` and `hi` are exclusive and may be half-way keys like 12.5 (a marker's place).
    """

    def __init__(
        self, session: Session, parent: Compaction | None, children: Sequence[Compaction]
    ) -> None:
        q = Q(session=session)
        if parent is not None:
            q &= Q(seq__gte=parent.first_seq or 0)
            if parent.last_seq is not None:
                q &= Q(seq__lte=parent.last_seq)
        for child in children:
            if child.first_seq is not None and child.last_seq is not None:
                q &= ~Q(seq__gte=child.first_seq, seq__lte=child.last_seq)
        self._messages = Message.objects.filter(q)

    def _between(self, lo: float | None, hi: float | None) -> QuerySet[Message]:
        query = self._messages
        if lo is not None:
            query = query.filter(seq__gt=math.floor(lo))
        if hi is not None:
            query = query.filter(seq__lt=math.ceil(hi))
        return query

    def edge(
        self, lo: float | None, hi: float | None, *, newest: bool, count: int
    ) -> list[Message]:
        """Up to `count` messages between the bounds from one end (newest first when
        `newest`, else oldest first)."""
        return list(self._between(lo, hi).order_by("-seq" if newest else "seq")[:count])

    def messages(self, lo: float | None, hi: float | None) -> list[Message]:
        """Every message between the bounds, oldest first."""
        return list(self._between(lo, hi).order_by("seq"))

    def run(self, lo: float | None, hi: float | None) -> MessageRun | None:
        """How many messages lie between the bounds, and their first and last seq."""
        stats = self._between(lo, hi).aggregate(
            count=Count("pk"), first=Min("seq"), last=Max("seq")
        )
        if not stats["count"]:
            return None
        return MessageRun(stats["count"], stats["first"], stats["last"])
