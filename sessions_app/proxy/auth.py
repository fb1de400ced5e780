"""Who is calling, and which credential goes upstream.

Either the caller presents a ctxweb API key as its provider key (`x-api-key: ctx_...` or
`Authorization: Bearer ctx_...`) and upstream gets the server's key, or it keeps its own
provider key and sends the ctxweb key in `X-Ctxweb-Key`: its provider credential then goes
upstream untouched. A provider key is never stored or logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest

from ..auth import active_key, note_auth_failure
from ..models import ApiKey
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
    scheme, _, token = str(headers.get("authorization", "")).partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _server_credentials(provider: Provider) -> dict[str, str]:
    if provider == "anthropic":
        key = str(getattr(settings, "CTXWEB_UPSTREAM_ANTHROPIC_API_KEY", "") or "")
        return {"x-api-key": key} if key else {}
    key = str(getattr(settings, "CTXWEB_UPSTREAM_OPENAI_API_KEY", "") or "")
    return {"authorization": f"Bearer {key}"} if key else {}


def _own_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    kept = {name: headers[name] for name in ("x-api-key", "authorization") if headers.get(name)}
    return kept


def _presented(request: HttpRequest, provider: Provider) -> tuple[str, dict[str, str], bool]:
    """The ctxweb key presented, the credentials for upstream, and whether the caller
    brings its own provider key (the ctxweb key then comes in `X-Ctxweb-Key`)."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    explicit = str(headers.get("x-ctxweb-key", "")).strip()
    if explicit:
        return explicit, _own_credentials(headers), True
    key = str(headers.get("x-api-key", "")).strip() or _bearer(headers)
    return key, _server_credentials(provider), False


def unchecked(request: HttpRequest, provider: Provider) -> Caller | None:
    """The caller while keys cannot be checked: one bringing its own provider key goes
    upstream with it, unrecorded (`user` None); None for one relying on the server's key."""
    _, credentials, own = _presented(request, provider)
    return Caller(user=None, credentials=credentials) if own and credentials else None


def authenticate(request: HttpRequest, provider: Provider) -> Caller | None:
    """The caller of a proxy request, or None when it presents no valid ctxweb key.

    With the database unavailable, a caller bringing its own provider key (`X-Ctxweb-Key`)
    is forwarded unrecorded (`user` None); a caller relying on the server's provider key
    cannot be checked: DatabaseError propagates (the view answers 503).
    """
    key, credentials, own = _presented(request, provider)
    try:
        row = active_key(key) if key.startswith(ApiKey.PREFIX) else None
    except DatabaseError as error:
        note_failure(error)
        if own and credentials:  # fail open: the caller's own provider key goes upstream
            logger.exception("proxy: keys cannot be checked; forwarding with the caller's key")
            return Caller(user=None, credentials=credentials)
        raise
    if row is None:
        note_auth_failure(request, key if key.startswith(ApiKey.PREFIX) else None)
        return None
    return Caller(user=row.user, credentials=credentials)
