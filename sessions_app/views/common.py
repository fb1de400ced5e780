"""Helpers shared by the page views: owner-scoped lookups and page-or-partial rendering."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.http import trigger_client_event
from django_htmx.middleware import HtmxDetails

from sessions_app.models import Compaction, Session
from sessions_app.selectors import compactions, sessions
from sessions_app.services.errors import NotFound

__all__ = [
    "SESSION_CHANGED",
    "is_htmx",
    "owned_compaction",
    "owned_session",
    "page_or_partial",
    "session_changed",
]

#: Client event sent after an action changed a session: the page parts listening refresh.
SESSION_CHANGED = "session-changed"


def owned_session(request: HttpRequest, session_id: uuid.UUID) -> Session:
    """The request user's session `session_id`; 404 when missing or someone else's.

    (Raises Http404 itself, not NotFound, so a view without `failures.service_errors`
    answers 404 too.)
    """
    try:
        return sessions.owned_session(request.user, session_id)
    except NotFound as missing:
        raise Http404(str(missing)) from missing


def owned_compaction(request: HttpRequest, session_id: uuid.UUID, number: int) -> Compaction:
    """Compaction `number` of the user's session; 404 otherwise."""
    session = owned_session(request, session_id)
    try:
        return compactions.session_compaction(session, number)
    except NotFound as missing:
        raise Http404(str(missing)) from missing


def is_htmx(request: HttpRequest) -> bool:
    """True for an htmx request that wants a fragment (not boosted, not a history restore)."""
    htmx = getattr(request, "htmx", None)
    return (
        isinstance(htmx, HtmxDetails)
        and bool(htmx)
        and not htmx.boosted
        and not htmx.history_restore_request
    )


def page_or_partial(
    request: HttpRequest,
    template: str,
    partial: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only `template#partial` for an HTMX (non-boosted) request."""
    name = f"{template}#{partial}" if is_htmx(request) else template
    response = render(request, name, context, status=status)
    response.headers["Vary"] = "HX-Request"
    return response


def session_changed(response: HttpResponse) -> HttpResponse:
    """Tell the page that the session changed, so its gauge, chart and tabs reload."""
    return trigger_client_event(response, SESSION_CHANGED, after="settle")
