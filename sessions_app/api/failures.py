"""Exceptions under /api/ as JSON `{"detail": ...}`: the one mapping.

Used by the NinjaAPI's exception handlers (ctxweb/api.py) and by
`sessions_app.middleware.ApiErrorMiddleware` (exceptions that escape django-ninja), so an
API client gets the same answer whatever raised and whatever DEBUG is:

- the service error tree (sessions_app/services/errors.py), by `service_error`:
  InvalidInput 422 `{"detail": [{"path", "message"}, ...]}`, NotFound 404, Conflict 409
  (with `revert_first` when another compaction must be reverted first), Unavailable 503
  with `Retry-After`;

- the database failing (lost connection, server gone, missing table: `django.db.Error`:
  OperationalError, InterfaceError, DatabaseError...), 503 with `Retry-After`; an
  `IntegrityError` (a concurrent write won), 409; a `DataError` (a value the checks before
  writing should have refused) is a bug, 500;
- the storage failing (`OSError`, including the engine's BlobStoreError), 503 with
  `Retry-After`;
- a body over Django's own limits, 413; other suspicious requests, 400;
- anything else, 500 with the traceback logged (a 500 is a bug).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from django.core.exceptions import (
    BadRequest,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.db import DataError, IntegrityError
from django.db import Error as DatabaseFailure
from django.http import Http404, HttpRequest, JsonResponse

from sessions_app.services.errors import Conflict, InvalidInput, NotFound, ServiceError, Unavailable

__all__ = ["RETRY_AFTER_SECONDS", "json_error", "service_error", "unexpected_error"]

logger = logging.getLogger("sessions_app")

#: Retry-After of a 503: a restarted database or a storage hiccup is usually back by then.
RETRY_AFTER_SECONDS: Final = 5


def json_error(status: int, detail: Any, **headers: str) -> JsonResponse:
    """`{"detail": detail}` with `status` and extra headers (`Retry_After` -> Retry-After)."""
    response = JsonResponse({"detail": detail}, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def service_error(request: HttpRequest, exc: ServiceError) -> JsonResponse:
    """The JSON answer to a service's refusal (the service error tree, mapped once)."""
    if isinstance(exc, InvalidInput):
        return json_error(422, [{"path": p.path, "message": p.message} for p in exc.problems])
    if isinstance(exc, NotFound):
        return json_error(404, str(exc) or "not found")
    if isinstance(exc, Conflict):
        body: dict[str, Any] = {"detail": str(exc)}
        if exc.blocking is not None:
            body["revert_first"] = exc.blocking
        return JsonResponse(body, status=409)
    if isinstance(exc, Unavailable):
        logger.error(
            "a dependency is unavailable",
            exc_info=exc,
            extra={"path": request.path, "method": request.method},
        )
        return json_error(503, str(exc), Retry_After=str(exc.retry_after))
    return unexpected_error(request, exc)


def unexpected_error(request: HttpRequest, exc: BaseException) -> JsonResponse:
    """The JSON answer to `exc` raised while serving the API request `request`."""
    if isinstance(exc, InvalidInput | NotFound | Conflict | Unavailable):
        return service_error(request, exc)
    where = {"path": request.path, "method": request.method}
    if isinstance(exc, IntegrityError):
        logger.warning("concurrent write conflict in the API", exc_info=exc, extra=where)
        return json_error(409, "a concurrent change conflicted with this request; try again")
    if isinstance(exc, DatabaseFailure) and not isinstance(exc, DataError):
        logger.error("database error in the API", exc_info=exc, extra=where)
        return _unavailable(f"database unavailable ({type(exc).__name__}); try again later")
    if isinstance(exc, OSError):
        logger.error("storage error in the API", exc_info=exc, extra=where)
        reason = exc.strerror or str(exc) or type(exc).__name__
        return _unavailable(f"storage unavailable: {reason}")
    if isinstance(exc, RequestDataTooBig):
        return json_error(413, "request body too large")
    if isinstance(exc, SuspiciousOperation | BadRequest):
        return json_error(400, f"bad request: {exc}")
    if isinstance(exc, PermissionDenied):
        return json_error(403, str(exc) or "forbidden")
    if isinstance(exc, Http404):
        return json_error(404, str(exc) or "not found")
    if isinstance(exc, RecursionError):
        logger.warning("input nested too deeply", exc_info=exc, extra=where)
        return json_error(400, "input nested too deeply")
    logger.error("unhandled error in the API", exc_info=exc, extra=where)
    return json_error(500, "internal server error")


def _unavailable(detail: str) -> JsonResponse:
    return json_error(503, detail, Retry_After=str(RETRY_AFTER_SECONDS))
