"""The session page's tabs: history, now vs before, runtime context and compaction log.

Each tab loads on its own URL for HTMX (the page pushes `?tab=` so reloads keep it); a plain
request to a tab URL redirects to the page with that tab open.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, Final

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from sessions_app.models import Session
from sessions_app.selectors.compactions import compaction_log
from sessions_app.services.compacting.reverting import revertable_numbers
from sessions_app.services.context import runtime as context_service
from sessions_app.services.context.runtime import Format
from sessions_app.services.sessions.threshold import shown_standing
from sessions_app.viewmodels.compare import compare_view
from sessions_app.viewmodels.history import MarkerTree, history_window
from sessions_app.viewmodels.limits import Limits

from .common import is_htmx, owned_session
from .failures import service_errors

__all__ = ["TAB_TEMPLATES", "context_download", "tab_context", "tab_view"]

TAB_TEMPLATES: Final = {
    "history": "sessions/_history.html#tab",
    "compare": "sessions/_compare.html#tab",
    "context": "sessions/_context.html#tab",
    "log": "sessions/_log.html#tab",
}
CONTEXT_FORMATS: Final[tuple[Format, ...]] = ("anthropic", "openai", "responses")
#: Contexts up to this size are shown indented; larger ones as the API sends them.
PRETTY_MAX_CHARS: Final = 1_000_000
#: At most this much of a context is put in the page (the download has it all).
SHOWN_MAX_CHARS: Final = 2_000_000


def _history(_request: HttpRequest, session: Session) -> dict[str, Any]:
    tree = MarkerTree.for_session(session)
    return {"window": history_window(session, tree=tree), "tree": tree}


def _compare(_request: HttpRequest, session: Session) -> dict[str, Any]:
    return {"compare": compare_view(session)}


def _format(request: HttpRequest) -> Format:
    wanted = request.GET.get("format")
    return next((fmt for fmt in CONTEXT_FORMATS if fmt == wanted), "anthropic")


def _context(request: HttpRequest, session: Session) -> dict[str, Any]:
    fmt = _format(request)
    text = context_service.context_json(session, fmt)
    shown, cut = text, False
    if len(text) <= PRETTY_MAX_CHARS:
        shown = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    elif len(text) > SHOWN_MAX_CHARS:
        shown, cut = text[:SHOWN_MAX_CHARS], True
    return {
        "context_text": shown,
        "context_cut": cut,
        "context_chars": len(text),
        "format": fmt,
        "formats": CONTEXT_FORMATS,
        "limits": Limits.of(shown_standing(session)),
    }


@login_required
@require_GET
@service_errors
def context_download(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The runtime context as a JSON file: the same body as GET /api/sessions/{id}/context."""
    session = owned_session(request, session_id)
    fmt = _format(request)
    response = HttpResponse(
        context_service.context_body(session, fmt), content_type="application/json"
    )
    response.headers["Content-Disposition"] = (
        f'attachment; filename="context-{session.pk}-{fmt}.json"'
    )
    return response


def _log(_request: HttpRequest, session: Session) -> dict[str, Any]:
    compactions = compaction_log(session)
    tree = MarkerTree(compactions)
    # Revert (or Undo offload) is offered exactly where the revert service allows it.
    revertable = revertable_numbers(compactions)
    return {"compactions": compactions, "tree": tree, "revertable": revertable}


_BUILDERS: Final[dict[str, Callable[[HttpRequest, Session], dict[str, Any]]]] = {
    "history": _history,
    "compare": _compare,
    "context": _context,
    "log": _log,
}


def tab_context(request: HttpRequest, session: Session, tab: str) -> dict[str, Any]:
    """What the template of `tab` needs."""
    return {"tab_template": TAB_TEMPLATES[tab], **_BUILDERS[tab](request, session)}


@login_required
@require_GET
@service_errors
def tab_view(request: HttpRequest, session_id: uuid.UUID, tab: str) -> HttpResponse:
    """One tab's content for HTMX; a plain request opens the page on that tab."""
    session = owned_session(request, session_id)
    if tab not in TAB_TEMPLATES:
        tab = "history"
    if not is_htmx(request):
        url = reverse("ui:session", args=[session.pk])
        query = request.GET.copy()
        query["tab"] = tab
        return redirect(f"{url}?{query.urlencode()}")
    context = {"session": session, "tab": tab, **tab_context(request, session, tab)}
    response = render(request, TAB_TEMPLATES[tab], context)
    response.headers["Vary"] = "HX-Request"
    return response
