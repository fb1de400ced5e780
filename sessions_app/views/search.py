"""Search everything (issue 29 item 6): `/search/?q=` over the full histories of all the
user's sessions, archived originals included (`selectors.search.search_history`), hits
grouped by session; and `messages/<seq>/path/`, the markers to open to reach a message,
which the History tab asks when opened at `?at=<message index>` (static/js/at.js)."""

from __future__ import annotations

import re
import uuid
from typing import Final

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from sessions_app.selectors.compactions import session_compaction
from sessions_app.selectors.history import message_at
from sessions_app.selectors.search import covering_compactions, search_history
from sessions_app.viewmodels.history import MarkerTree
from sessions_app.viewmodels.search import HIT_LIMIT, group_hits

from .common import owned_session, page_or_partial
from .failures import service_errors

__all__ = ["QUERY_CHARS", "history_search", "message_path"]

#: Longest query read (the rest is ignored).
QUERY_CHARS: Final = 200
_WORD = re.compile(r"\w")
SEARCH_TEMPLATE: Final = "sessions/search.html"


@login_required
@require_GET
@service_errors
def history_search(request: HttpRequest) -> HttpResponse:
    """The hits of `?q=` grouped by session: the page, or its hits alone for htmx."""
    query = request.GET.get("q", "")[:QUERY_CHARS].strip()
    # A query without a word is no search yet (typing has just begun), not an error.
    hits = search_history(request.user, query, limit=HIT_LIMIT) if _WORD.search(query) else []
    context = {
        "query": query,
        "searched": bool(_WORD.search(query)),
        "groups": group_hits(hits),
        "hit_count": len(hits),
        "more": len(hits) >= HIT_LIMIT,
    }
    return page_or_partial(request, SEARCH_TEMPLATE, "hits", context)


@login_required
@require_GET
@service_errors
def message_path(request: HttpRequest, session_id: uuid.UUID, seq: int) -> JsonResponse:
    """The markers to open, outermost first, to see message `seq` in the History tab:
    `{"path": [5, 4]}` (the last one's originals hold it; `[]`: it is in the live context)."""
    session = owned_session(request, session_id)
    message = message_at(session, seq)
    number = covering_compactions([message]).get(message.pk)
    if number is None:
        return JsonResponse({"path": []})
    tree = MarkerTree.for_session(session)
    return JsonResponse({"path": tree.path_to(session_compaction(session, number))})
