"""`POST /api/compact`: stateless compaction, nothing stored; messages in, compacted messages out.

Not to be confused with `session_compactions` (compacting a stored session)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from sessions_app.services.compacting.stateless import compact_stateless

from .common import errors
from .schemas import StatelessCompactIn, StatelessCompactOut
from .throttling import SummarizerThrottle

router = Router(tags=["compact"])


@router.post(
    "/compact",
    response={200: StatelessCompactOut, **errors(400, 403, 413, 422)},
    throttle=SummarizerThrottle("compact"),
)
def compact(request: HttpRequest, payload: StatelessCompactIn) -> dict[str, Any]:  # noqa: ARG001 (ninja)
    """Compact `messages` (after an optional `system`) with a profile and policy overrides."""
    run = compact_stateless(
        list(payload.messages),
        system=payload.system,
        profile=payload.profile,
        policy=payload.policy,
        instructions=payload.instructions,
        force=payload.force,
    )
    result = run.result
    return {
        "system": run.system,
        "messages": run.messages,
        "compacted": result.compacted,
        "reason": result.reason,
        "summary": result.summary,
        "summarizer": result.summarizer,
        "stats": result.stats.to_dict(),
        "tokens_before": run.tokens_before,
        "tokens_after": run.tokens_after,
        "events": [event.to_dict() for event in result.events],
        "steps": [
            {
                "step": r.step,
                "ran": r.ran,
                "changed": r.changed,
                "tokens_before": r.tokens_before,
                "tokens_after": r.tokens_after,
                "detail": dict(r.detail),
            }
            for r in result.steps
        ],
    }
