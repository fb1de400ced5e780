"""`/api/sessions/{id}/compactions`: compact now, list, read with originals, revert."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from sessions_app.services.background.jobs import enqueue_compaction
from sessions_app.services.compacting.archives import read_archive
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import CompactionOutcome, compact_session
from sessions_app.services.sessions.policies import profile_for

from ..models import Compaction
from ..selectors.compactions import compaction_page, session_compaction
from .common import errors, owned_session
from .pagination import page_limit
from .schemas import (
    CompactIn,
    CompactionDetailOut,
    CompactionListOut,
    CompactionOut,
    CompactionResultOut,
    JobQueuedOut,
    Text,
)
from .serializers import compaction_dicts
from .throttling import SummarizerThrottle

router = Router(tags=["compactions"])


class CompactionListQuery(Schema):
    cursor: Text | None = Field(None, max_length=500)
    limit: int | None = Field(None, ge=1, le=500)
    status: Text | None = Field(None, max_length=16)


@router.post(
    "/{session_id}/compactions",
    response={
        200: CompactionResultOut,
        201: CompactionResultOut,
        202: JobQueuedOut,
        **errors(400, 403, 409, 413, 422, 503),
    },
    throttle=SummarizerThrottle("compact"),
)
def compact(
    request: HttpRequest, session_id: str, payload: CompactIn
) -> tuple[int, dict[str, Any]]:
    """Compact now: optional profile and instructions, a dry run, a caller-written summary
    (the agent's compress_context) or `background: true` (202 with a job id)."""
    session = owned_session(request, session_id)
    profile = profile_for(session, payload.profile)
    if payload.background and not payload.dry_run:
        job = enqueue_compaction(
            session,
            params={
                "trigger": "api",
                "profile": profile.name if profile.pk else None,
                "instructions": payload.instructions,
                "summary": payload.summary,
            },
        )
        return 202, {"job_id": job.pk, "status": job.status, "url": f"/api/jobs/{job.pk}"}
    outcome = compact_session(
        session,
        trigger=Compaction.Trigger.API,
        profile=profile,
        instructions=payload.instructions,
        summary=payload.summary,
        dry_run=payload.dry_run,
    )
    status = 201 if outcome.compacted and not outcome.dry_run else 200
    return status, outcome_dict(outcome)


def outcome_dict(outcome: CompactionOutcome) -> dict[str, Any]:
    """A compaction request's outcome, with the stored compaction's fields on top."""
    stored = compaction_dicts([outcome.compaction])[0] if outcome.compaction else None
    return {
        "compacted": outcome.compacted,
        "dry_run": outcome.dry_run,
        "reason": outcome.reason,
        "preview": outcome.preview.to_dict() if outcome.preview else None,
        "number": stored["number"] if stored else None,
        "parent": stored["parent"] if stored else None,
        "status": stored["status"] if stored else None,
        "trigger": stored["trigger"] if stored else None,
        "created_at": stored["created_at"] if stored else None,
        "compaction": stored,
    }


@router.get("/{session_id}/compactions", response={200: CompactionListOut, **errors(422)})
def list_compactions(
    request: HttpRequest, session_id: str, query: Query[CompactionListQuery]
) -> dict[str, Any]:
    """Every compaction point of the session (failed and reverted ones too), oldest first."""
    session = owned_session(request, session_id)
    page = compaction_page(
        session, status=query.status, cursor=query.cursor, limit=page_limit(query.limit)
    )
    return {"items": compaction_dicts(page.items), "next": page.next_cursor}


@router.get(
    "/{session_id}/compactions/{number}", response={200: CompactionDetailOut, **errors(422, 503)}
)
def read_compaction(request: HttpRequest, session_id: str, number: int) -> dict[str, Any]:
    """One compaction point with its archived originals (the exact entries it replaced)."""
    compaction = _compaction(request, session_id, number)
    data = compaction_dicts([compaction])[0]
    archive = read_archive(compaction) if compaction.archive else None
    return {
        **data,
        "details": compaction.details,
        "originals": [e.to_dict() for e in archive.entries] if archive else [],
        "transformed": [e.to_dict() for e in archive.transformed] if archive else [],
    }


@router.post(
    "/{session_id}/compactions/{number}/revert",
    response={200: CompactionOut, **errors(403, 409, 422, 503)},
)
def revert(request: HttpRequest, session_id: str, number: int) -> dict[str, Any]:
    """Undo a compaction; only the newest over a region (else 409 naming which first)."""
    session = owned_session(request, session_id)
    session_compaction(session, number)  # 404 before anything is tried
    reverted = revert_compaction(session, number)
    return compaction_dicts([reverted])[0]


def _compaction(request: HttpRequest, session_id: str, number: int) -> Compaction:
    session = owned_session(request, session_id)
    return session_compaction(session, number)
