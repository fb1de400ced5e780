"""`/api/sessions/{id}/context`, `/context/prepare`, `/check` and `/offload`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router
from ninja.params.functions import Body as body_param

from sessions_app.services.compacting.auto import prepare_context
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.context.runtime import Format, check, context_body
from sessions_app.services.sessions.policies import profile_for

from .common import errors, owned_session
from .schemas import CheckIn, CheckOut, ContextOut, OffloadIn, OffloadOut, PrepareOut
from .throttling import SummarizerThrottle

router = Router(tags=["context"])

#: Optional JSON bodies: absent is the same as `{}`. (A `null` body is refused like any
#: other body that is not an object, so the schema does not offer it.)
_NO_CHECK_OPTIONS: Any = body_param(CheckIn(profile=None))
_NO_OFFLOAD_OPTIONS: Any = body_param(OffloadIn(min_chars=None))


@router.get("/{session_id}/context", response={200: ContextOut, **errors(422)})
def context(request: HttpRequest, session_id: str, format: Format = "anthropic") -> HttpResponse:
    """The runtime context as Anthropic `{system, messages}` (or an OpenAI chat array)."""
    body = context_body(owned_session(request, session_id), format, just_read=True)
    return HttpResponse(body, content_type="application/json")


@router.post(
    "/{session_id}/context/prepare",
    response={200: PrepareOut, **errors(403, 422)},
    throttle=SummarizerThrottle("prepare"),
)
def prepare(request: HttpRequest, session_id: str, format: Format = "anthropic") -> dict[str, Any]:
    """The pre-LLM-call check: compact first when over the threshold, then the context."""
    return prepare_context(owned_session(request, session_id), fmt=format).to_dict()


@router.post("/{session_id}/check", response={200: CheckOut, **errors(400, 403, 422)})
def check_session(
    request: HttpRequest, session_id: str, payload: CheckIn = _NO_CHECK_OPTIONS
) -> dict[str, Any]:
    """`{should_compact, tokens, threshold, limit, usage}` from the cached token counts."""
    session = owned_session(request, session_id)
    profile = profile_for(session, payload.profile) if payload.profile else None
    return check(session, profile, just_read=True).to_dict()


@router.post("/{session_id}/offload", response={200: OffloadOut, **errors(400, 403, 409, 422)})
def offload(
    request: HttpRequest, session_id: str, payload: OffloadIn = _NO_OFFLOAD_OPTIONS
) -> dict[str, Any]:
    """Write large tool results to files; the runtime context keeps references."""
    session = owned_session(request, session_id)
    return asdict(offload_session(session, min_chars=payload.min_chars, trigger="api"))
