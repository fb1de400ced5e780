"""REST API authentication: `Authorization: Bearer <key>` or a logged-in browser session.

API keys are looked up by their public prefix and compared in constant time with the
stored SHA-256 hash; revoked keys are refused. A browser session must pass Django's CSRF
check on unsafe methods. Repeated bad keys from one client address, or with one key prefix,
are throttled (429); a valid key is never refused for someone else's failures. The proxy
counts its failed keys here too (`refuse_failed`), so all routes share one count.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any, NoReturn

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import AuthenticationError, HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from .counters import Count, count
from .models import ApiKey

__all__ = [
    "ApiKeyAuth",
    "SessionCsrfAuth",
    "Throttled",
    "active_key",
    "authenticate_key",
    "client_id",
    "note_auth_failure",
    "refuse_failed",
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


def _failure_keys(request: HttpRequest, token: str | None) -> list[str]:
    """The counters a failed attempt raises: its address's and its presented key's."""
    keys = [f"ctxweb:auth-failures:addr:{_digest(client_id(request))}"]
    lookup = ApiKey.lookup_of(token) if token else None
    if lookup is not None:
        keys.append(f"ctxweb:auth-failures:key:{_digest(lookup)}")
    return keys


def _digest(value: str) -> str:
    # Cache keys of a bounded length and alphabet, whatever a forwarded header held.
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:32]


def note_auth_failure(request: HttpRequest, token: str | None = None) -> Count:
    """Count one failed authentication of this client address and, when `token` is shaped
    like an API key, of that key; the higher of the counts after this one.

    Counted before it is compared (sessions_app/counters.py): of failures arriving together
    never more than CTXWEB_AUTH_FAILURE_LIMIT are within the limit, whatever the cache.
    """
    return count(_failure_keys(request, token), _failure_window())


def refuse_failed(request: HttpRequest, token: str | None) -> Throttled | None:
    """Count a failed authentication; `Throttled` (to raise) once past the limit."""
    counted = note_auth_failure(request, token)
    return Throttled(counted.retry_after) if counted.value > _failure_limit() else None


class Throttled(HttpError):
    """Too many failed authentications from this client, or with this key's prefix."""

    def __init__(self, retry_after: int | None = None) -> None:
        super().__init__(429, "too many failed authentication attempts; try again later")
        self.retry_after = retry_after if retry_after is not None else _failure_window()


def authenticate_key(key: str) -> Any | None:
    """The user owning the active API key `key`, or None."""
    row = active_key(key)
    return row.user if row is not None else None


def active_key(key: str) -> ApiKey | None:
    """The active ApiKey row of the plain key `key` (its user active too), or None."""
    lookup = ApiKey.lookup_of(key)
    if lookup is None:
        return None
    row = ApiKey.objects.select_related("user").filter(lookup=lookup).first()
    if row is None or not row.matches(key) or not row.is_active or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > _TOUCH_EVERY:
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer ctx_...`; a bad key is a 401 even when a session cookie exists.

    The key is checked first: a valid key always passes, so nobody can lock its owner out
    by failing from the same address or with the same key prefix. Only failures count;
    past CTXWEB_AUTH_FAILURE_LIMIT of them in the window, from this address or with this
    key prefix, a failure is answered 429 (with Retry-After) instead of 401. Each failure
    is counted before it is compared, so failures arriving together cannot pass together.
    """

    def __call__(self, request: HttpRequest) -> Any | None:
        header = request.headers.get(self.header)
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            _refuse(request, None, "malformed Authorization header")
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        user = authenticate_key(token)
        if user is None:
            _refuse(request, token, "invalid or revoked API key")
        return user


def _refuse(request: HttpRequest, token: str | None, message: str) -> NoReturn:
    throttled = refuse_failed(request, token)
    if throttled is not None:
        raise throttled
    raise AuthenticationError(message=message)


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
