"""Who is calling, and which credential goes upstream.

Either the caller presents a ctxweb API key as its provider key (`x-api-key: ctx_...` or
`Authorization: Bearer ctx_...`) and upstream gets the server's key, or it keeps its own
provider key and sends the ctxweb key in `X-Ctxweb-Key`: its provider credential then goes
upstream untouched. A ctxweb key never goes upstream, in any header; a provider key is
never stored or logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest

from ..auth import active_key, refuse_failed
from ..models import ApiKey
from ..services.proxying.upstream import server_credentials
from .base import Provider
from .outage import note_failure

__all__ = ["Caller", "authenticate", "unchecked"]

logger = logging.getLogger("sessions_app")


@dataclass(frozen=True)
class Caller:
    """The authenticated user and the credential headers to send upstream."""

    #: None when the database could not be reached: forward, record nothing.
    user: Any
    credentials: dict[str, str] = field(repr=False)


def _bearer(headers: Mapping[str, str]) -> str:
    scheme, _, token = str(headers.get("authorization", "")).strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _is_ctxweb_key(value: str) -> bool:
    """True when a header value holds a ctxweb key (alone or after a scheme such as Bearer),
    valid or not: such a value never goes upstream."""
    return any(part.lower().startswith(ApiKey.PREFIX) for part in value.split())


def _shaped(key: str) -> bool:
    return key.startswith(ApiKey.PREFIX)


def _own_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's provider credentials: `x-api-key` and `Authorization` as sent, but an
    empty one or one holding a ctxweb key."""
    return {
        name: headers[name]
        for name in ("x-api-key", "authorization")
        if str(headers.get(name, "")).strip() and not _is_ctxweb_key(str(headers[name]))
    }


def _ctxweb_key(headers: Mapping[str, str]) -> str:
    """The ctxweb key presented: `X-Ctxweb-Key` when set, else the first of `x-api-key` and
    the Bearer token holding one, else whichever of them is set (to be refused)."""
    explicit = str(headers.get("x-ctxweb-key", "")).strip()
    if explicit:
        return explicit
    candidates = [str(headers.get("x-api-key", "")).strip(), _bearer(headers)]
    shaped = [value for value in candidates if _shaped(value)]
    return next(iter(shaped or [value for value in candidates if value]), "")


def _presented(request: HttpRequest, provider: Provider) -> tuple[str, dict[str, str], bool]:
    """The ctxweb key presented, the credentials for upstream, and whether they are the
    caller's own provider key.

    A ctxweb key never goes upstream: a provider header holding one (valid or not) is
    dropped, and a caller left with no provider key of its own gets the server's.
    """
    headers = {name.lower(): value for name, value in request.headers.items()}
    own = _own_credentials(headers)
    if own:
        return _ctxweb_key(headers), own, True
    return _ctxweb_key(headers), server_credentials(provider), False


def unchecked(request: HttpRequest, provider: Provider) -> Caller | None:
    """The caller while keys cannot be checked: one bringing its own provider key (and a
    ctxweb key) goes upstream with it, unrecorded (`user` None); None for one relying on
    the server's key."""
    key, credentials, own = _presented(request, provider)
    return Caller(user=None, credentials=credentials) if own and _shaped(key) else None


def authenticate(request: HttpRequest, provider: Provider) -> Caller | None:
    """The caller of a proxy request, or None when it presents no valid ctxweb key (a
    failed authentication, counted as the REST API counts them: past the limit `Throttled`
    is raised instead).

    With the database unavailable, a caller bringing its own provider key and a ctxweb key
    is forwarded unrecorded (`user` None); a caller relying on the server's provider key
    cannot be checked: DatabaseError propagates (the view answers 503).
    """
    key, credentials, own = _presented(request, provider)
    try:
        row = active_key(key) if _shaped(key) else None
    except DatabaseError as error:
        note_failure(error)
        if own and _shaped(key):  # fail open: the caller's own provider key goes upstream
            logger.exception("proxy: keys cannot be checked; forwarding with the caller's key")
            return Caller(user=None, credentials=credentials)
        raise
    if row is None:
        throttled = refuse_failed(request, key if _shaped(key) else None)
        if throttled is not None:
            raise throttled
        return None
    return Caller(user=row.user, credentials=credentials)
