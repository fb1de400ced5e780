"""Helpers shared by the routers: the caller's session, and error responses for the docs."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpRequest

from ..models import Session
from ..services.sessions import sessions_for
from .schemas import ErrorOut

__all__ = ["errors", "owned_session", "user_of"]


def user_of(request: HttpRequest) -> Any:
    """The authenticated user (set by the API's auth)."""
    return getattr(request, "auth", None)


def owned_session(request: HttpRequest, session_id: str, *, lock: bool = False) -> Session:
    """The caller's session `session_id`; 404 for a malformed id or another owner's session."""
    try:
        key = uuid.UUID(str(session_id))
    except ValueError:
        raise Http404("no such session") from None
    queryset = sessions_for(user_of(request))
    session = queryset.filter(pk=key).first()
    if session is None:
        raise Http404("no such session")
    return session


def errors(*codes: int) -> dict[int, type[ErrorOut]]:
    """Response declarations for the error statuses an endpoint can return."""
    return dict.fromkeys((400, 401, 404, 429, 503, *codes), ErrorOut)
