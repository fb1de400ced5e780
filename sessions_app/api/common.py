"""Helpers shared by the routers: the caller's session, service errors, error declarations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.http import Http404, HttpRequest
from ninja.errors import ValidationError

from ..models import Session
from ..selectors import sessions as session_selectors
from ..services.errors import InvalidInput, NotFound
from .schemas import ErrorOut

__all__ = ["errors", "owned_session", "service_errors", "user_of"]


def user_of(request: HttpRequest) -> Any:
    """The authenticated user (set by the API's auth)."""
    return getattr(request, "auth", None)


@contextmanager
def service_errors() -> Iterator[None]:
    """Answer the selectors' NotFound as a 404 and InvalidInput as a 422 naming each field.

    A bridge for the routers of sessions and jobs: these answers are the API's error
    contract (README, "API"). Once ctxweb/api.py maps the service error tree itself, this
    becomes a no-op and can go.
    """
    try:
        yield
    except NotFound as missing:
        raise Http404(str(missing)) from missing
    except InvalidInput as invalid:
        raise ValidationError(
            [{"loc": (p.path,), "msg": p.message, "type": "value_error"} for p in invalid.problems]
        ) from invalid


def owned_session(request: HttpRequest, session_id: str, *, lock: bool = False) -> Session:
    """The caller's session `session_id`; 404 for a malformed id or another owner's session.

    (`lock` is accepted for the callers that pass it; the read takes no lock.)
    """
    with service_errors():
        return session_selectors.owned_session(user_of(request), session_id)


def errors(*codes: int) -> dict[int, type[ErrorOut]]:
    """Response declarations for the error statuses an endpoint can return."""
    return dict.fromkeys((400, 401, 404, 429, 503, *codes), ErrorOut)
