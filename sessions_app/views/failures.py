"""The service error tree as page responses: the one mapping for the HTML views.

Every view is wrapped in `service_errors` (a decorator rather than a middleware, so the
API under /api/, which maps the tree to JSON in ctxweb/api.py, is never touched):

- `NotFound`: Django's 404 page (`Http404`);
- `InvalidInput`: 422 with the problems' messages;
- `Conflict`: 409 with why (and which compaction must go first);
- `Unavailable`: 503 with `Retry-After`.

An htmx request gets only the notice (base.html's htmx config swaps 409, 422 and 503 into
the page, so the message shows where the action was asked); a plain request gets a page.

Services translate the engine's own errors (`compaction.CompactionError`) into the tree, so
none reaches a view; one that did would be a bug (500), never a 422. Views never catch
service errors themselves.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Final, ParamSpec

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from sessions_app.services.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    ServiceError,
    Unavailable,
)

from .common import is_htmx

__all__ = ["FAILURE_TEMPLATE", "failure_response", "service_errors"]

logger = logging.getLogger("sessions_app")

FAILURE_TEMPLATE: Final = "sessions/failure.html"
P = ParamSpec("P")


def _status(error: ServiceError) -> tuple[int, dict[str, str]]:
    """The status and extra headers that answer `error`."""
    if isinstance(error, Unavailable):
        return 503, {"Retry-After": str(error.retry_after)}
    if isinstance(error, Conflict):
        return 409, {}
    return 422, {}


def _message(error: ServiceError) -> str:
    if isinstance(error, InvalidInput):
        problem = error.first
        return (
            problem.message
            if problem.path in {"", "body"}
            else f"{problem.path}: {problem.message}"
        )
    return str(error) or type(error).__name__


def failure_response(request: HttpRequest, error: ServiceError) -> HttpResponse:
    """The response to a service error raised by a view."""
    if isinstance(error, NotFound):
        raise Http404(str(error)) from error
    status, headers = _status(error)
    if status == 503:
        # An expected failure of a dependency (a summarizer key unset, a model down): one line
        # naming it, no traceback; the page says the same to the person who asked.
        logger.warning(
            "page action unavailable: %s", error, extra={"path": request.path, "status": status}
        )
    name = f"{FAILURE_TEMPLATE}#notice" if is_htmx(request) else FAILURE_TEMPLATE
    response = render(request, name, {"text": _message(error), "status": status}, status=status)
    for header, value in headers.items():
        response[header] = value
    return response


def service_errors(view: Callable[P, HttpResponse]) -> Callable[P, HttpResponse]:
    """`view`, with service errors answered as pages."""

    @functools.wraps(view)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            return view(*args, **kwargs)
        except ServiceError as error:
            request = args[0]
            if not isinstance(request, HttpRequest):  # every view's first argument
                raise
            return failure_response(request, error)

    return wrapped
