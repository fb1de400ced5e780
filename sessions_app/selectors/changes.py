"""What changed in a session, or in an owner's list, since the page last drew it.

The live pages (README, "The pages") poll these: `session_stamp` is one indexed query on the
session's primary key, `list_stamp` one aggregate over the owner's sessions (the owner index),
so an unchanged page costs a single query per poll.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from django.db.models import Count, Max, Sum

from sessions_app.models import Message, Session
from sessions_app.services.errors import NotFound

from .sessions import Owner, owned_sessions

__all__ = ["SessionStamp", "list_stamp", "messages_since", "session_stamp"]


@dataclass(frozen=True)
class SessionStamp:
    """Where a session stands: `version` moves on every change, `revision` when existing
    context entries changed (a compaction, revert or offload: the markers may differ), and
    `next_seq` is the seq the next appended message gets."""

    version: int
    revision: int
    next_seq: int

    def token(self) -> str:
        """The stamp as the page carries it: `version.revision.next_seq`."""
        return f"{self.version}.{self.revision}.{self.next_seq}"

    @classmethod
    def of(cls, session: Session) -> SessionStamp:
        """The stamp of a session as loaded (no query)."""
        return cls(session.version, session.context_revision, session.next_seq)

    @classmethod
    def parse(cls, token: str) -> SessionStamp | None:
        """A stamp from its token; None when the token is not one."""
        parts = token.split(".")
        if len(parts) != 3 or not all(p.isdigit() and len(p) <= 12 for p in parts):
            return None
        version, revision, next_seq = (int(p) for p in parts)
        return cls(version, revision, next_seq)


def session_stamp(user: Owner, session_id: uuid.UUID) -> SessionStamp:
    """The stamp of `user`'s session `session_id` (one query); NotFound otherwise."""
    row = (
        owned_sessions(user)
        .filter(pk=session_id)
        .values_list("version", "context_revision", "next_seq")
        .first()
    )
    if row is None:
        raise NotFound("no such session")
    return SessionStamp(*row)


def messages_since(
    session: Session, seq: int, *, before: int, limit: int
) -> tuple[list[Message], bool]:
    """Messages of `session` from `seq` to `before` (excluded), by seq (at most `limit`),
    and whether more were left out."""
    rows = list(
        Message.objects.filter(session=session, seq__gte=seq, seq__lt=before).order_by("seq")[
            : limit + 1
        ]
    )
    return rows[:limit], len(rows) > limit


def list_stamp(user: Owner) -> str:
    """A short token that changes whenever any of `user`'s sessions is created, changed or
    deleted (every change bumps a session's version; a deletion lowers the count)."""
    totals = owned_sessions(user).aggregate(
        count=Count("pk"), versions=Sum("version"), latest=Max("updated_at")
    )
    latest = totals["latest"].isoformat() if totals["latest"] else ""
    raw = f"{totals['count']}|{totals['versions'] or 0}|{latest}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]
