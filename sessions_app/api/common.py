"""Helpers shared by the routers: the caller's session and error declarations.

Service errors raised here (a malformed or foreign session id is NotFound) are answered
by the one mapping in ctxweb/api.py (sessions_app/api/failures.py `service_error`).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from ..models import Session
from ..selectors import sessions as session_selectors
from .schemas import ErrorOut

__all__ = ["errors", "owned_session", "user_of"]


def user_of(request: HttpRequest) -> Any:
    """The authenticated user (set by the API's auth)."""
    return getattr(request, "auth", None)


def owned_session(request: HttpRequest, session_id: str) -> Session:
    """The caller's session `session_id`; 404 for a malformed id or another owner's session."""
    return session_selectors.owned_session(user_of(request), session_id)


def errors(*codes: int) -> dict[int, type[ErrorOut]]:
    """Response declarations for the error statuses an endpoint can return."""
    return dict.fromkeys((400, 401, 404, 429, 503, *codes), ErrorOut)
