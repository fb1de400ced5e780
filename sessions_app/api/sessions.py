"""`/api/sessions`: list, create, read, delete, append messages, full history."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from sessions_app.services.compacting.auto import post_call_check
from sessions_app.services.sessions.lifecycle import append_messages, create_session, delete_session

from ..selectors.compactions import session_compactions
from ..selectors.history import history_page
from ..selectors.sessions import owned_sessions, session_slice
from .common import errors, owned_session, user_of
from .pagination import page_limit
from .schemas import (
    AppendIn,
    AppendOut,
    HistoryOut,
    SessionCreateIn,
    SessionListOut,
    SessionOut,
    Text,
)
from .serializers import ProfileCache, marker_tree, session_dict

router = Router(tags=["sessions"])


class SessionListQuery(Schema):
    search: Text | None = Field(None, max_length=200)
    cursor: Text | None = Field(None, max_length=500)
    limit: int | None = Field(None, ge=1, le=500)


class HistoryQuery(Schema):
    cursor: Text | None = Field(None, max_length=500)
    limit: int | None = Field(None, ge=1, le=1000)


@router.get("", response={200: SessionListOut, **errors(422)})
def list_sessions(request: HttpRequest, query: Query[SessionListQuery]) -> dict[str, Any]:
    """The caller's sessions, latest activity first; `search` keeps the sessions whose
    title, model, source format or external id contain every word of it."""
    found = session_slice(
        owned_sessions(user_of(request)),
        search=query.search or "",
        cursor=query.cursor,
        limit=page_limit(query.limit),
    )
    profiles = ProfileCache()
    return {
        "items": [session_dict(s, profiles) for s in found.sessions],
        "next": found.next_cursor,
    }


@router.post("", response={201: SessionOut, **errors(400, 403, 409, 413, 422)})
def create(request: HttpRequest, payload: SessionCreateIn) -> tuple[int, dict[str, Any]]:
    """A new session with optional messages, system prompt, title, limit and profile."""
    session = create_session(
        user_of(request),
        title=payload.title,
        messages=payload.messages,
        system=payload.system,
        context_limit=payload.context_limit,
        profile=payload.profile,
        model=payload.model,
        metadata=payload.metadata,
    )
    return 201, session_dict(session)


@router.get("/{session_id}", response={200: SessionOut, **errors()})
def read(request: HttpRequest, session_id: str) -> dict[str, Any]:
    """One session with its token stats."""
    return session_dict(owned_session(request, session_id))


@router.delete("/{session_id}", response={204: None, **errors(403)})
def delete(request: HttpRequest, session_id: str) -> HttpResponse:
    """Delete a session, its history, compactions, archives and offloaded files."""
    delete_session(owned_session(request, session_id))
    return HttpResponse(status=204)


@router.post("/{session_id}/messages", response={201: AppendOut, **errors(400, 403, 409, 413, 422)})
def append(request: HttpRequest, session_id: str, payload: AppendIn) -> tuple[int, dict[str, Any]]:
    """Append messages; an assistant message with `usage` runs the post-call check."""
    session = owned_session(request, session_id)
    rows = append_messages(session, payload.messages, expected_version=payload.expected_version)
    job = post_call_check(session, payload.messages)
    return 201, {
        "appended": len(rows),
        "first_seq": rows[0].seq,
        "last_seq": rows[-1].seq,
        "token_counts": [row.token_count for row in rows],
        "version": session.version,
        "message_count": session.message_count,
        "history_tokens": session.history_tokens,
        "context_tokens": session.context_tokens,
        "job_id": job.pk if job is not None else None,
    }


@router.get("/{session_id}/history", response={200: HistoryOut, **errors(422)})
def history(request: HttpRequest, session_id: str, query: Query[HistoryQuery]) -> dict[str, Any]:
    """The full history by seq, with the compaction markers over the page (nested)."""
    session = owned_session(request, session_id)
    limit = page_limit(query.limit, default=100, maximum=1000)
    page = history_page(session, cursor=query.cursor, limit=limit)
    markers = marker_tree(session_compactions(session))
    if page.messages:
        low, high = page.messages[0].seq, page.messages[-1].seq
        markers = [m for m in markers if _overlaps(m, low, high)]
    return {
        "messages": [
            {
                "seq": r.seq,
                "role": r.role,
                "content": r.content,
                "extra": r.extra,
                "created_at": r.created_at,
                "token_count": r.token_count,
                "original_id": r.original_id,
                "in_context": r.pk in page.in_context,
            }
            for r in page.messages
        ],
        "compactions": markers,
        "next": page.next_cursor,
    }


def _overlaps(marker: dict[str, Any], low: int, high: int) -> bool:
    first, last = marker["first_seq"], marker["last_seq"]
    if first is None or last is None:
        return True
    return bool(first <= high and last >= low)
