"""Request body size limit: bodies over CTXWEB_MAX_BODY_BYTES get 413 before being read."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

__all__ = ["BodySizeLimitMiddleware", "max_body_bytes"]


def max_body_bytes() -> int:
    """The configured limit (CTXWEB_MAX_BODY_BYTES, default 20 MB)."""
    return int(getattr(settings, "CTXWEB_MAX_BODY_BYTES", 20 * 1024 * 1024))


class BodySizeLimitMiddleware:
    """Refuse a request whose Content-Length exceeds the limit (413), early and cheaply.

    API paths (`/api/`) get a JSON `{"detail": ...}` body; other paths plain text.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = max_body_bytes()
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            message = f"request body of {length} bytes exceeds the limit of {limit} bytes"
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=413)
            return HttpResponse(message, status=413, content_type="text/plain")
        return self.get_response(request)
