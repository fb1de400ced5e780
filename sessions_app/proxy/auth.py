"""Who is calling, and which credential goes upstream.

Either the caller presents a ctxweb API key as its provider key (`x-api-key: ctx_...` or
`Authorization: Bearer ctx_...`) and upstream gets the server's key, or it keeps its own
provider key and sends the ctxweb key in `X-Ctxweb-Key`: its provider credential then goes
upstream untouched. A provider key is never stored or logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from ..auth import active_key, note_auth_failure
from ..models import ApiKey
from .base import Provider

__all__ = ["Caller", "authenticate"]


@dataclass(frozen=True)
class Caller:
    """The authenticated user and the credential headers to send upstream."""

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


def authenticate(request: HttpRequest, provider: Provider) -> Caller | None:
    """The caller of a proxy request, or None when it presents no valid ctxweb key."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    explicit = str(headers.get("x-ctxweb-key", "")).strip()
    if explicit:
        key, credentials = explicit, _own_credentials(headers)
    else:
        key = str(headers.get("x-api-key", "")).strip() or _bearer(headers)
        credentials = _server_credentials(provider)
    row = active_key(key) if key.startswith(ApiKey.PREFIX) else None
    if row is None:
        note_auth_failure(request, key if key.startswith(ApiKey.PREFIX) else None)
        return None
    return Caller(user=row.user, credentials=credentials)
