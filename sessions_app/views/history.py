"""The history's lazy parts: older windows, a marker's summary and originals, full contents."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app.selectors import history as history_reads
from sessions_app.selectors.compactions import session_compactions
from sessions_app.selectors.files import offloaded_file
from sessions_app.selectors.history import message_at
from sessions_app.selectors.retention import lost_identifiers
from sessions_app.services.compacting.reverting import revert_refusal
from sessions_app.services.errors import NotFound
from sessions_app.viewmodels.blocks import build_message_views, result_text
from sessions_app.viewmodels.history import MarkerTree, history_window, parse_bound

from .common import owned_compaction, owned_session
from .failures import service_errors

__all__ = [
    "compaction_lost",
    "compaction_originals",
    "compaction_path",
    "compaction_summary",
    "history_gap",
    "message_full",
    "message_range",
    "offloaded_content",
    "tool_result_full",
]

HISTORY = "sessions/_history.html"
#: At most this many messages in one range request (the compare tab's folded runs).
MAX_RANGE = 200
#: At most this many lost identifiers listed under a summary (the count says the rest).
MAX_LOST_SHOWN = 60


def _seq_param(request: HttpRequest, name: str) -> int:
    """A required whole-number query parameter; without it there is no such range (404)."""
    try:
        return int(request.GET[name])
    except (KeyError, ValueError):
        raise NotFound(f"{name} is required and must be a message number") from None


def _bounds(request: HttpRequest) -> tuple[float | None, float | None]:
    return parse_bound(request.GET.get("lo")), parse_bound(request.GET.get("hi"))


@login_required
@require_GET
@service_errors
def history_gap(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The top level between `?lo=` and `?hi=` (a gap row opened): its newest messages."""
    session = owned_session(request, session_id)
    lo, hi = _bounds(request)
    window = history_window(session, lo=lo, hi=hi)
    return render(request, f"{HISTORY}#window", {"session": session, "window": window})


@login_required
@require_GET
@service_errors
def compaction_summary(request: HttpRequest, session_id: uuid.UUID, number: int) -> HttpResponse:
    """A marker's summary text, with who wrote it and the instructions it was given."""
    compaction = owned_compaction(request, session_id, number)
    rows = session_compactions(compaction.session)
    context = {
        "session": compaction.session,
        "compaction": compaction,
        "revertable": revert_refusal(compaction, rows) is None,
    }
    return render(request, f"{HISTORY}#summary", context)


@login_required
@require_GET
@service_errors
def compaction_lost(request: HttpRequest, session_id: uuid.UUID, number: int) -> HttpResponse:
    """What the summary lost: the identifiers of the originals it does not mention."""
    compaction = owned_compaction(request, session_id, number)
    context = {
        "session": compaction.session,
        "compaction": compaction,
        "lost": lost_identifiers(compaction),
        "shown": MAX_LOST_SHOWN,
    }
    return render(request, f"{HISTORY}#lost", context)


@login_required
@require_GET
@service_errors
def compaction_path(request: HttpRequest, session_id: uuid.UUID, number: int) -> JsonResponse:
    """The markers to open, outermost first, to reach compaction `number` in the history:
    `{"path": [5, 4, 3]}` (just `[number]` for a top-level one)."""
    compaction = owned_compaction(request, session_id, number)
    tree = MarkerTree.for_session(compaction.session)
    return JsonResponse({"path": tree.path_to(compaction)})


@login_required
@require_GET
@service_errors
def compaction_originals(request: HttpRequest, session_id: uuid.UUID, number: int) -> HttpResponse:
    """A marker's original messages (its oldest ones, or those between `?lo=` and `?hi=`),
    with the markers nested inside it in their places."""
    compaction = owned_compaction(request, session_id, number)
    session = compaction.session
    tree = MarkerTree.for_session(session)
    if compaction.pk not in tree.active:
        raise NotFound("this compaction folds no messages")
    lo, hi = _bounds(request)
    window = history_window(session, tree=tree, parent=compaction, lo=lo, hi=hi)
    context = {"session": session, "window": window, "compaction": compaction}
    return render(request, f"{HISTORY}#window", context)


@login_required
@require_GET
@service_errors
def message_full(request: HttpRequest, session_id: uuid.UUID, seq: int) -> HttpResponse:
    """One message with nothing cut (what a 'show all' button loads)."""
    session = owned_session(request, session_id)
    message = message_at(session, seq)
    view = build_message_views([message], full=True)[0]
    context = {"session": session, "m": view, "full": True}
    return render(request, "sessions/_message.html", context)


@login_required
@require_GET
@service_errors
def message_range(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """History messages `?first=`..`?last=` (at most MAX_RANGE), for the compare tab."""
    session = owned_session(request, session_id)
    first, last = _seq_param(request, "first"), _seq_param(request, "last")
    rows, more = history_reads.message_range(session, first, last, limit=MAX_RANGE)
    views = build_message_views(rows)
    context = {"session": session, "views": views, "more": more, "last": last}
    return render(request, f"{HISTORY}#range", context)


@login_required
@require_GET
@service_errors
def tool_result_full(
    request: HttpRequest, session_id: uuid.UUID, seq: int, tool_use_id: str
) -> HttpResponse:
    """The whole output of one tool call, as it is in the full history."""
    session = owned_session(request, session_id)
    message = message_at(session, seq)
    blocks = message.content if isinstance(message.content, list) else []
    for block in blocks:
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_result"
            and str(block.get("tool_use_id")) == tool_use_id
        ):
            text = result_text(block.get("content"))
            context = {"session": session, "text": text, "is_error": bool(block.get("is_error"))}
            return render(request, f"{HISTORY}#full_text", context)
    raise NotFound("no such tool result")


@login_required
@require_GET
@service_errors
def offloaded_content(request: HttpRequest, session_id: uuid.UUID, name: str) -> HttpResponse:
    """An offloaded tool result's file, as plain text (never rendered as HTML)."""
    session = owned_session(request, session_id)
    data = offloaded_file(session, name)
    response = HttpResponse(data, content_type="text/plain; charset=utf-8")
    response.headers["Content-Disposition"] = "inline"
    return response
