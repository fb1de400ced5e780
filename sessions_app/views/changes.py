"""The live pages' polls: what changed in a session, or in the list, since the page drew it.

`GET /sessions/<id>/changes/?since=<stamp>&tab=<open tab>` and `GET /changes/?since=<stamp>`
(with the list's `q`, `sort`, `cursor`) answer 204 when nothing changed (one query), else
the parts to update: out-of-band swaps for the session page, the results for the list
(README, "The pages").
"""

from __future__ import annotations

import uuid
from typing import Final

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app.selectors import changes
from sessions_app.selectors.changes import SessionStamp
from sessions_app.services.sessions.threshold import shown_standing
from sessions_app.viewmodels.limits import Limits
from sessions_app.viewmodels.live import live_update

from .common import owned_session, session_changed
from .failures import service_errors
from .session_detail import overview_context
from .sessions_list import list_context

__all__ = ["list_changes", "session_changes"]

LIVE_TEMPLATE: Final = "sessions/_live.html"


def _unchanged() -> HttpResponse:
    response = HttpResponse(status=204)
    response.headers["Cache-Control"] = "no-store"
    return response


@login_required
@require_GET
@service_errors
def session_changes(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """204 when the session is still at `since`; else the new stamp, the header stats and
    gauge, and the history's new rows (or the whole history after a compaction), all as
    out-of-band swaps. With another tab open, the page is told to reload that tab.
    `limits` (the page's `Limits.token`, sent by every fifth poll): the limits it drew; when
    they no longer hold (a profile changed in the admin), the overview is drawn again."""
    since = SessionStamp.parse(request.GET.get("since", ""))
    now = changes.session_stamp(request.user, session_id)
    drawn = request.GET.get("limits")
    if since == now and drawn is None:
        return _unchanged()
    session = owned_session(request, session_id)
    if since == now and drawn == Limits.of(shown_standing(session)).token:
        return _unchanged()  # only the limits were asked about, and they are as drawn
    context = overview_context(session)
    context.update(live=now, oob=True)
    if request.GET.get("tab", "history") != "history":
        # The other tabs are redrawn whole, by the page's own session-changed handler.
        return session_changed(render(request, f"{LIVE_TEMPLATE}#session_poller", context))
    context["update"] = live_update(session, since, now)
    return render(request, f"{LIVE_TEMPLATE}#session_changes", context)


@login_required
@require_GET
@service_errors
def list_changes(request: HttpRequest) -> HttpResponse:
    """204 while none of the user's sessions changed since `since`; else the list's
    results (with `q`, `sort` and `cursor` as the page has them)."""
    if request.GET.get("since") == changes.list_stamp(request.user):
        return _unchanged()
    response = render(request, "sessions/list.html#results", list_context(request))
    response.headers["Cache-Control"] = "no-store"
    return response
