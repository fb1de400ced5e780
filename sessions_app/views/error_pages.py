"""The app's own 404 and 500 pages, DEBUG on or off (issue 29 item 2).

`make run` runs with DEBUG on, where Django answers an unknown address or a raised `Http404`
with its technical page (the URL patterns, the settings' names) and an uncaught exception
with a traceback page. A newcomer must never see those: this middleware, the innermost of
the browser stack, answers them with templates/404.html and templates/500.html (with the
mobile viewport of base.html) in both modes; a 500's traceback goes to the console log
(`django.request`), as it does with DEBUG off. With DEBUG off Django does all this itself,
so the middleware steps aside, as it does under `make dev` (CTXWEB_DEBUG_PAGES: Django's
technical pages for whoever is debugging the app) and for the API, whose errors are JSON
(`middleware.ApiErrorMiddleware`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.urls import Resolver404, resolve
from django.views import defaults

__all__ = ["AppErrorPagesMiddleware", "own_error_pages"]

#: Django's own logger of the 500s it answers (settings.LOGGING sends it to the console).
request_logger = logging.getLogger("django.request")


def own_error_pages(request: HttpRequest) -> bool:
    """True when the app, not Django's DEBUG machinery, must answer this request's errors."""
    return (
        bool(settings.DEBUG)
        and not getattr(settings, "CTXWEB_DEBUG_PAGES", False)
        and not (request.path == "/api" or request.path.startswith("/api/"))
    )


def _resolves(request: HttpRequest) -> bool:
    try:
        resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return False
    return True


class AppErrorPagesMiddleware:
    """Unknown addresses, `Http404` and uncaught exceptions answered by the app's pages."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        # An unknown address fails in Django's resolver, before any view (and before
        # process_exception could see it).
        if own_error_pages(request) and not _resolves(request):
            return defaults.page_not_found(request, Http404(request.path))
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A view's `Http404` or uncaught exception as the app's page (None: Django's)."""
        if not own_error_pages(request):
            return None
        if isinstance(exception, Http404):
            return defaults.page_not_found(request, exception)
        if isinstance(exception, PermissionDenied):
            return None  # Django's 403 page whatever DEBUG is
        if isinstance(exception, BadRequest | SuspiciousOperation):
            return defaults.bad_request(request, exception)
        request_logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500, "request": request},
        )
        return defaults.server_error(request)
