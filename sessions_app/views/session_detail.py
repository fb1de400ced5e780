"""`/sessions/<id>/`: gauge, token timeline, tabs (history, now vs before, context, log)."""

from __future__ import annotations

import uuid
from typing import Any, Final

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from sessions_app.models import Session
from sessions_app.selectors.changes import SessionStamp
from sessions_app.selectors.profiles import profiles
from sessions_app.services.background import jobs
from sessions_app.services.sessions.threshold import shown_standing
from sessions_app.viewmodels.gauge import context_gauge
from sessions_app.viewmodels.limits import Limits
from sessions_app.viewmodels.reported import reported_usage
from sessions_app.viewmodels.timeline import token_timeline

from .actions import job_phases
from .common import is_htmx, owned_session
from .failures import service_errors
from .tabs import tab_context

__all__ = ["TABS", "overview", "overview_context", "session_detail"]

#: Tab key, label; the history tab is the default.
TABS: Final = (
    ("history", "History"),
    ("compare", "Now vs before"),
    ("context", "Runtime context"),
    ("log", "Compaction log"),
)
DETAIL_TEMPLATE: Final = "sessions/detail.html"


def overview_context(session: Session) -> dict[str, Any]:
    """Header stats, context gauge and token timeline of a session."""
    limits = Limits.of(shown_standing(session))  # the engine's threshold answer
    usage = reported_usage(session)
    return {
        "session": session,
        "limits": limits,
        "gauge": context_gauge(session, limits),
        "chart": token_timeline(session, limits),
        "reported": usage.current,
        "usage": usage,
    }


@login_required
@require_GET
@service_errors
def session_detail(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The session page; `?tab=` picks the open tab."""
    session = owned_session(request, session_id)
    tab = request.GET.get("tab", "history")
    if tab not in dict(TABS):
        tab = "history"
    live = SessionStamp.of(session)  # before anything is read: a later change shows next poll
    context = overview_context(session)
    job = jobs.active_job(session)
    context.update(
        tabs=TABS,
        tab=tab,
        profiles=profiles(),
        job=job,
        done=False,
        phases=job_phases(job) if job else [],
        live=live,
    )
    context.update(tab_context(request, session, tab))
    return render(request, DETAIL_TEMPLATE, context)


@login_required
@require_GET
@service_errors
def overview(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Only the header stats, gauge and timeline (refreshed after an action); a plain
    request opens the session page."""
    session = owned_session(request, session_id)
    if not is_htmx(request):
        return redirect("ui:session", session.pk)
    return render(request, f"{DETAIL_TEMPLATE}#overview", overview_context(session))
