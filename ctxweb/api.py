"""The REST API (django-ninja) under /api/: its instance, authentication and error mapping.

Every error is JSON `{"detail": ...}`: 400 malformed JSON (or a body that is not a JSON
object), 401 missing or bad credentials, 403 CSRF, 404 unknown (or another owner's) ids,
409 conflicts, 413 bodies over CTXWEB_MAX_BODY_BYTES, 422 invalid input with each problem's
path, 429 throttled.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.types import DictStrAny

from compaction import (
    BlobStoreError,
    CompactionError,
    InvalidMessagesError,
    PolicyError,
)
from sessions_app.api import compact, compactions, context, health, jobs, sessions, transfer
from sessions_app.auth import ApiKeyAuth, SessionCsrfAuth
from sessions_app.services.errors import Conflict

__all__ = ["ObjectBodyParser", "api"]

logger = logging.getLogger("sessions_app")


class MalformedBody(ValueError):
    """A JSON request body that is not valid JSON or not a JSON object."""


class ObjectBodyParser(Parser):
    """JSON bodies must be objects, as the OpenAPI schema says.

    django-ninja alone takes an array as an empty object, so a wrong body would silently
    mean "all defaults": `null`, an array, a string, a number or a boolean raises
    MalformedBody, which django-ninja turns into a 400. (An empty body is not parsed: where
    the body is optional, sending none still means "all defaults".)
    """

    def parse_body(self, request: HttpRequest) -> DictStrAny:
        try:
            data = json.loads(request.body)
        except ValueError as error:
            raise MalformedBody(str(error)) from error
        if not isinstance(data, dict):
            raise MalformedBody(f"the body must be a JSON object, not {_json_type(data)}")
        return data


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "a string"


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


def _problems(error: InvalidMessagesError) -> list[dict[str, str]]:
    return [{"path": p.path, "message": p.message} for p in error.problems]


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
    message = exc.message
    if isinstance(exc.__cause__, MalformedBody):
        message = f"malformed JSON body: {exc.__cause__}"
    return api.create_response(request, {"detail": message}, status=exc.status_code)


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


@api.exception_handler(InvalidMessagesError)
def _invalid_messages(request: HttpRequest, exc: InvalidMessagesError) -> HttpResponse:
    return api.create_response(request, {"detail": _problems(exc)}, status=422)


@api.exception_handler(PolicyError)
def _policy_error(request: HttpRequest, exc: PolicyError) -> HttpResponse:
    message = str(exc).split(": ", 1)[-1]
    return api.create_response(
        request, {"detail": [{"path": exc.field, "message": message}]}, status=422
    )


@api.exception_handler(Conflict)
def _conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    body: dict[str, Any] = {"detail": str(exc)}
    if exc.blocking is not None:
        body["revert_first"] = exc.blocking
    return api.create_response(request, body, status=409)


@api.exception_handler(BlobStoreError)
def _storage_error(request: HttpRequest, exc: BlobStoreError) -> HttpResponse:
    logger.error("storage error in the API: %s", exc)
    return api.create_response(request, {"detail": f"storage unavailable: {exc}"}, status=503)


@api.exception_handler(CompactionError)
def _compaction_error(request: HttpRequest, exc: CompactionError) -> HttpResponse:
    return api.create_response(
        request, {"detail": [{"path": "body", "message": str(exc)}]}, status=422
    )


@api.exception_handler(ObjectDoesNotExist)
def _missing(request: HttpRequest, exc: ObjectDoesNotExist) -> HttpResponse:
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
api.add_router("", compact.router)
# Import and export (sessions_app/api/transfer.py) first: `/sessions/import` must win over
# `/sessions/{session_id}`.
api.add_router("/sessions", transfer.router)
api.add_router("/sessions", sessions.router)
api.add_router("/sessions", context.router)
api.add_router("/sessions", compactions.router)
api.add_router("/jobs", jobs.router)
