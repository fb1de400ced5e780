"""The REST API (django-ninja) under /api/: its instance, authentication and error mapping.

Every error is JSON `{"detail": ...}`, whatever DEBUG is: 400 malformed JSON (or a body that
is not a JSON object, `NaN`, nesting deeper than 128 levels), 401 missing or bad
credentials, 403 CSRF, 404 unknown (or another owner's) ids and unknown paths, 405, 409
conflicts (with `revert_first`), 413 bodies over CTXWEB_MAX_BODY_BYTES, 422 invalid input
with each problem's path (a NUL character, a lone surrogate or an infinite number included),
429 throttled (with Retry-After), 503 database or storage unavailable (with Retry-After),
and 500 only for a bug (traceback logged). The service error tree
(sessions_app/services/errors.py) is mapped once, by
`sessions_app.api.failures.service_error`; services translate the engine's own errors
(`compaction.CompactionError`) into that tree, so none reaches a router (the stateless
`POST /api/compact`, which calls the engine itself, translates them the same way; a
storage failure is an OSError either way). Exceptions without a handler of their own go
through `sessions_app.api.failures`, as do those escaping django-ninja
(`sessions_app.middleware.ApiErrorMiddleware`, which also turns Django's own HTML errors
under /api/ into JSON).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.errors import Throttled as RateLimited
from ninja.parser import Parser
from ninja.types import DictStrAny

from sessions_app.api import (
    context,
    health,
    jobs,
    session_compactions,
    sessions,
    stateless_compact,
    transfer,
)
from sessions_app.api.body import MalformedBody, UnstorableBody, parse_object_body
from sessions_app.api.failures import service_error, unexpected_error
from sessions_app.auth import ApiKeyAuth, SessionCsrfAuth, Throttled
from sessions_app.services.errors import InvalidInput, Problem, ServiceError

__all__ = ["ObjectBodyParser", "api"]


class ObjectBodyParser(Parser):
    """JSON bodies must be objects, as the OpenAPI schema says, of storable values.

    django-ninja alone takes an array as an empty object, so a wrong body would silently
    mean "all defaults": `null`, an array, a string, a number or a boolean raises
    MalformedBody, which django-ninja turns into a 400. (An empty body is not parsed: where
    the body is optional, sending none still means "all defaults".) A NUL character, a lone
    surrogate or an infinite number anywhere raises UnstorableBody: 422 naming its path
    (sessions_app/api/body.py).
    """

    def parse_body(self, request: HttpRequest) -> DictStrAny:
        return parse_object_body(request.body)


api = NinjaAPI(
    title="ctxweb API",
    version="1.0.0",
    description=(
        "Store agent sessions, compact their context and read what the model sees now. "
        "Authenticate with `Authorization: Bearer <key>` (`manage.py create_api_key USER`) "
        "or a logged-in browser session (CSRF token required on unsafe methods)."
    ),
    auth=[ApiKeyAuth(), SessionCsrfAuth()],
    urls_namespace="api",
    parser=ObjectBodyParser(),
)


def _location(loc: Any) -> str:
    """A pydantic error location as a path: ("body", "payload", "messages", 3) -> messages[3]."""
    parts = list(loc) if isinstance(loc, list | tuple) else [loc]
    if parts and parts[0] in {"body", "query", "path", "header", "cookie", "form"}:
        parts = parts[1:]
        if len(parts) > 1 and parts[0] in {"payload", "query"}:
            parts = parts[1:]
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # django-ninja wraps every parser error in a generic 400; say what was wrong instead.
    cause = exc.__cause__
    if isinstance(cause, UnstorableBody):
        return _unstorable(request, cause)
    if isinstance(cause, MalformedBody):
        return _malformed(request, cause)
    if isinstance(cause, RecursionError | RequestDataTooBig):
        return unexpected_error(request, cause)
    message = exc.message
    if isinstance(exc, RateLimited):
        message = "too many requests to an endpoint that calls the summary model; slow down"
    response = api.create_response(request, {"detail": message}, status=exc.status_code)
    if isinstance(exc, Throttled):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(MalformedBody)
def _malformed(request: HttpRequest, exc: MalformedBody) -> HttpResponse:
    return api.create_response(request, {"detail": f"malformed JSON body: {exc}"}, status=400)


@api.exception_handler(UnstorableBody)
def _unstorable(request: HttpRequest, exc: UnstorableBody) -> HttpResponse:
    problems = InvalidInput(Problem(p.path, p.message) for p in exc.problems)
    return service_error(request, problems)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    detail = [
        {
            "path": _location(error.get("loc", ())),
            "message": str(error.get("msg", "invalid")),
            "type": str(error.get("type", "")),
        }
        for error in exc.errors
    ]
    return api.create_response(request, {"detail": detail}, status=422)


@api.exception_handler(ServiceError)
def _service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    # The service error tree, mapped once (sessions_app/api/failures.py).
    return service_error(request, exc)


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Replaces django-ninja's default, which re-raises (HTML 500) with DEBUG off and
    # answers a plain-text traceback with DEBUG on.
    return unexpected_error(request, exc)


@api.exception_handler(ObjectDoesNotExist)
def _missing(request: HttpRequest, _exc: ObjectDoesNotExist) -> HttpResponse:
    return api.create_response(request, {"detail": "not found"}, status=404)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc) or "not found"}, status=404)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    message = exc.message if exc.message != "Unauthorized" else "authentication required"
    response = api.create_response(request, {"detail": message}, status=401)
    response["WWW-Authenticate"] = "Bearer"
    return response


api.add_router("", health.router)
api.add_router("", stateless_compact.router)
# Import and export (sessions_app/api/transfer.py) first: `/sessions/import` must win over
# `/sessions/{session_id}`.
api.add_router("/sessions", transfer.router)
api.add_router("/sessions", sessions.router)
api.add_router("/sessions", context.router)
api.add_router("/sessions", session_compactions.router)
api.add_router("/jobs", jobs.router)
