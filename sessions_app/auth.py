"""REST API authentication: `Authorization: Bearer <key>` or a logged-in browser session.

API keys are looked up by their public prefix and compared in constant time with the
stored SHA-256 hash; revoked keys are refused. A browser session must pass Django's CSRF
check on unsafe methods. Repeated bad keys from one client are throttled (429).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import AuthenticationError, HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from .models import ApiKey

__all__ = [
    "ApiKeyAuth",
    "SessionCsrfAuth",
    "authenticate_key",
    "client_id",
    "note_auth_failure",
]

#: last_used_at is written at most this often per key (it is a hint, not an audit log).
_TOUCH_EVERY = timedelta(seconds=60)


def _failure_limit() -> int:
    return int(getattr(settings, "CTXWEB_AUTH_FAILURE_LIMIT", 20))


def _failure_window() -> int:
    return int(getattr(settings, "CTXWEB_AUTH_FAILURE_WINDOW_SECONDS", 300))


def client_id(request: HttpRequest) -> str:
    """The client a failed attempt is charged to: its address.

    Behind `CTXWEB_TRUSTED_PROXIES` = n reverse proxies, the n-th address from the right of
    X-Forwarded-For (the one the outermost trusted proxy saw); entries further left are
    written by the client and could be forged.
    """
    remote = str(request.META.get("REMOTE_ADDR") or "unknown")
    n = int(getattr(settings, "CTXWEB_TRUSTED_PROXIES", 0))
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
    xff = [part.strip() for part in forwarded.split(",") if part.strip()]
    return xff[-n] if n > 0 and len(xff) >= n else remote


def _failure_key(request: HttpRequest) -> str:
    return f"ctxweb:auth-failures:{client_id(request)}"


def note_auth_failure(request: HttpRequest) -> None:
    """Count one failed authentication of this client (expires after the window)."""
    key = _failure_key(request)
    if cache.add(key, 1, timeout=_failure_window()):
        return
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=_failure_window())


def _throttled(request: HttpRequest) -> bool:
    return int(cache.get(_failure_key(request)) or 0) >= _failure_limit()


class Throttled(HttpError):
    """Too many failed authentications from this client."""

    def __init__(self) -> None:
        super().__init__(429, "too many failed authentication attempts; try again later")


def authenticate_key(key: str) -> Any | None:
    """The user owning the active API key `key`, or None."""
    lookup = ApiKey.lookup_of(key)
    if lookup is None:
        return None
    row = ApiKey.objects.select_related("user").filter(lookup=lookup).first()
    if row is None or not row.matches(key) or not row.is_active or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > _TOUCH_EVERY:
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer ctx_...`; a bad key is a 401 even when a session cookie exists."""

    def __call__(self, request: HttpRequest) -> Any | None:
        if _throttled(request):
            raise Throttled()
        header = request.headers.get(self.header)
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            note_auth_failure(request)
            raise AuthenticationError(message="malformed Authorization header")
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        user = authenticate_key(token)
        if user is None:
            note_auth_failure(request)
            raise AuthenticationError(message="invalid or revoked API key")
        return user


class SessionCsrfAuth(APIKeyCookie):
    """A logged-in Django session; unsafe methods must pass the CSRF check (else 403)."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self) -> None:
        super().__init__(csrf=True)

    def _get_key(self, request: HttpRequest) -> str | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        if check_csrf(request) is not None:
            raise HttpError(403, "CSRF check failed")
        return request.COOKIES.get(self.param_name) or "session"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any | None:
        user = getattr(request, "user", None)
        if key and user is not None and user.is_authenticated:
            return user
        return None
