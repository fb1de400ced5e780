"""`/`: the user's sessions with search, sort, cursor pagination and an upload form."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from sessions_app.selectors.changes import list_stamp
from sessions_app.selectors.sessions import owned_sessions
from sessions_app.services.sessions.threshold import StandingResolver
from sessions_app.viewmodels.limits import Limits
from sessions_app.viewmodels.listing import SORTS, session_page

from .common import page_or_partial
from .failures import service_errors
from .upload import format_choices

__all__ = ["list_context", "session_list"]


def list_context(request: HttpRequest) -> dict[str, Any]:
    """The list's page of sessions for the request's search, sort and cursor, and the stamp
    its live poll compares (views/changes.py)."""
    # The stamp first: a change made while the page is read then shows on the next poll.
    stamp = list_stamp(request.user)
    standing = StandingResolver()  # the default profile read once for the page
    page = session_page(
        owned_sessions(request.user),
        query=request.GET.get("q", "")[:200],
        sort=request.GET.get("sort", ""),
        cursor=request.GET.get("cursor", "")[:500],
        limits=lambda session: Limits.of(standing(session)),
    )
    return {
        "page": page,
        "sorts": SORTS,
        "formats": format_choices(),
        "live_stamp": stamp,
    }


@login_required
@require_GET
@service_errors
def session_list(request: HttpRequest) -> HttpResponse:
    """The list page, or only its results for an HTMX search/sort/page request."""
    return page_or_partial(request, "sessions/list.html", "results", list_context(request))
