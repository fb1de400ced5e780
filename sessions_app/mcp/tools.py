"""What the MCP tools do, for one authenticated owner: synchronous calls of the selectors
and services, answering plain values (sessions_app/mcp/server.py turns them into tool
results, a ServiceError into a tool error)."""

from __future__ import annotations

from typing import Any, Final

from sessions_app.models import Compaction, Session
from sessions_app.selectors.compactions import session_compaction, session_compactions
from sessions_app.selectors.history import message_range
from sessions_app.selectors.search import search_history
from sessions_app.selectors.sessions import Owner, owned_session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import InvalidInput
from sessions_app.services.sessions.threshold import shown_standing

from .transcript import page_of

__all__ = [
    "MAX_PAGE_MESSAGES",
    "compact_now",
    "context_status",
    "read_messages",
    "search_hits",
]

#: Messages one read_messages page reads from the database at most.
MAX_PAGE_MESSAGES: Final = 200


def search_hits(owner: Owner, query: str, session: str | None, limit: int) -> dict[str, Any]:
    """The search_history tool: hits newest first, as plain values."""
    scope = owned_session(owner, session) if session else None
    hits = search_history(owner, query, session=scope, limit=limit)
    return {
        "hits": [
            {
                "session": hit.session_id,
                "title": hit.session_title,
                "index": hit.message_index,
                "role": hit.role,
                "time": hit.created_at.isoformat() if hit.created_at else None,
                "compaction": hit.compaction,
                "snippet": hit.snippet,
            }
            for hit in hits
        ],
        "more": len(hits) == limit,
    }


def read_messages(
    owner: Owner,
    session_id: str,
    start: int | None,
    end: int | None,
    compaction: int | None,
) -> str:
    """The read_messages tool: the original messages of a range, or of what compaction
    #`compaction` covered (narrowed by `start`/`end`), as text under the page budget."""
    session = owned_session(owner, session_id)
    first, last, label = _bounds(session, compaction)
    if start is not None:
        first = max(first, start)
    if end is not None:
        last = min(last, end)
    if start is not None and end is not None and start > end:
        raise InvalidInput.field("end", "must not be before start")
    rows, _ = message_range(session, first, last, limit=MAX_PAGE_MESSAGES)
    if not rows:
        return f"No messages {first}-{last} in session {session.pk}{label}."
    page = page_of(rows, whole=start is not None and start == end)
    head = (
        f"Session {session.pk} ({session.title or 'untitled'}): messages {page.first}-{page.last}"
    )
    text = f"{head}{label}.\n\n{page.text}"
    more = page.next_start if page.next_start is not None else _after(rows, last)
    if more is not None:
        text += (
            f"\n\n[more: call read_messages with session={session.pk}, start={more}, end={last}]"
        )
    return text


def _after(rows: list[Any], last: int) -> int | None:
    """The index after a full page of rows, when the range goes on."""
    if len(rows) == MAX_PAGE_MESSAGES and rows[-1].seq < last:
        return int(rows[-1].seq) + 1
    return None


def _bounds(session: Session, number: int | None) -> tuple[int, int, str]:
    """The range to read: the whole history, or what compaction `number` covered."""
    if number is None:
        return 0, max(session.next_seq - 1, 0), ""
    row = session_compaction(session, number)
    if not row.is_point or row.first_seq is None or row.last_seq is None:
        raise InvalidInput.field("compaction", f"#{number} covers no messages (an offload)")
    return row.first_seq, row.last_seq, f", compacted as #{number}"


def context_status(owner: Owner, session_id: str) -> dict[str, Any]:
    """The context_status tool: tokens now, threshold, limits and the compactions."""
    session = owned_session(owner, session_id)
    standing = shown_standing(session)
    return {
        "session": str(session.pk),
        "title": session.title,
        "tokens": standing.tokens,
        "threshold": standing.threshold,
        "limit": standing.context_limit,
        "hard_limit": standing.hard_limit,
        "over_threshold": standing.over_threshold,
        "profile": standing.profile,
        "messages": session.message_count,
        "compactions": [_compaction(row) for row in session_compactions(session) if row.is_point],
    }


def _compaction(row: Compaction) -> dict[str, Any]:
    return {
        "number": row.number,
        "status": row.status,
        "time": row.created_at.isoformat(),
        "trigger": row.trigger,
        "first_index": row.first_seq,
        "last_index": row.last_seq,
        "tokens_before": row.tokens_before,
        "tokens_after": row.tokens_after,
    }


def compact_now(
    owner: Owner, session_id: str, instructions: str | None, summary: str | None
) -> dict[str, Any]:
    """The compact_now tool: compact the session now, with `instructions` for the
    summarizer or with the caller's own `summary` of the compacted messages."""
    session = owned_session(owner, session_id)
    outcome = compact_session(
        session,
        trigger=Compaction.Trigger.API,
        instructions=instructions or None,
        summary=summary if summary is not None else None,
        force=True,
    )
    row = outcome.compaction
    answer: dict[str, Any] = {"compacted": outcome.compacted, "reason": outcome.reason}
    if row is not None:
        answer.update(_compaction(row), failure=row.failure_reason or None)
    return answer
