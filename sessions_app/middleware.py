"""Middleware: request body size limit, and JSON errors for everything under /api/."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from .api.failures import json_error, unexpected_error

__all__ = ["ApiErrorMiddleware", "BodySizeLimitMiddleware", "max_body_bytes", "oversized_body"]

#: Headers of an error response that still mean something once its body is JSON.
_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


def max_body_bytes() -> int:
    """The configured limit (CTXWEB_MAX_BODY_BYTES, default 20 MB)."""
    return int(getattr(settings, "CTXWEB_MAX_BODY_BYTES", 20 * 1024 * 1024))


def is_api(request: HttpRequest) -> bool:
    """True for the REST API's paths."""
    return request.path == "/api" or request.path.startswith("/api/")


def oversized_body(request: HttpRequest) -> str | None:
    """Why the request's declared body is over CTXWEB_MAX_BODY_BYTES (None: it is not);
    read from Content-Length, before the body is."""
    limit = max_body_bytes()
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        return f"request body of {length} bytes exceeds the limit of {limit} bytes"
    return None


class BodySizeLimitMiddleware:
    """Refuse a request whose Content-Length exceeds the limit (413), early and cheaply.

    API paths (`/api/`) get a JSON `{"detail": ...}` body; other paths plain text.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        message = oversized_body(request)
        if message is not None:
            if is_api(request):
                return JsonResponse({"detail": message}, status=413)
            return HttpResponse(message, status=413, content_type="text/plain")
        return self.get_response(request)


class ApiErrorMiddleware:
    """Under /api/, every error is JSON `{"detail": ...}` with its status, DEBUG on or off.

    django-ninja's exception handlers (ctxweb/api.py) answer what happens inside an
    operation. This catches the rest: an exception escaping the operation (mapped by
    `sessions_app.api.failures`, like ninja's catch-all), and the HTML or plain-text errors
    Django itself answers (unknown path 404, 405, CSRF 403, a 500 from another middleware),
    whose bodies are replaced. The outermost middleware, so it sees every response.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if not is_api(request) or response.status_code < 400 or _is_json(response):
            return response
        return _as_json(request, response)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """An exception raised by an API view (outside ninja's handlers) as JSON."""
        if not is_api(request):
            return None
        return unexpected_error(request, exception)


def _is_json(response: HttpResponseBase) -> bool:
    return str(response.get("Content-Type", "")).startswith("application/json")


def _as_json(request: HttpRequest, response: HttpResponseBase) -> HttpResponse:
    status = response.status_code
    try:
        phrase = HTTPStatus(status).phrase.lower()
    except ValueError:
        phrase = "error"
    if status == 404:
        detail = f"no API endpoint at {request.path}"
    elif status == 405:
        detail = f"method {request.method} not allowed here"
    else:
        detail = phrase
    replaced = json_error(status, detail)
    for header in _KEPT_HEADERS:
        if header in response:
            replaced[header] = response[header]
    return replaced
