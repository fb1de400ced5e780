"""The upstream provider: its URL, the headers forwarded each way, and the HTTP call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import httpx
from django.conf import settings

from ..services.proxying.upstream import upstream_base
from .base import Provider

__all__ = ["request_headers", "response_headers", "timeout", "upstream_url"]

#: Request headers never forwarded: the connection's own, and ctxweb's and the caller's
#: credentials (the auth module decides which credential goes upstream).
_DROPPED_REQUEST: Final = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "content-length",
        "transfer-encoding",
        "accept-encoding",
        "cookie",
        "upgrade",
        "te",
        "proxy-authorization",
        "x-api-key",
        "authorization",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
    }
)
#: Response headers the server in front sets itself.
_DROPPED_RESPONSE: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "date",
        "server",
        "set-cookie",
    }
)


def upstream_url(provider: Provider, path: str, query: str = "") -> str:
    """The provider's URL for `path` (`/v1/messages`), with the caller's query string."""
    return f"{upstream_base(provider)}{path}{'?' + query if query else ''}"


def request_headers(incoming: Mapping[str, str], credentials: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers (`anthropic-version`, `anthropic-beta`, ...) minus connection,
    credential and ctxweb headers, plus the chosen upstream `credentials`."""
    kept = {
        name.lower(): value
        for name, value in incoming.items()
        if name.lower() not in _DROPPED_REQUEST and not name.lower().startswith("x-ctxweb-")
    }
    kept["accept-encoding"] = "identity"  # the bytes pass through as they came
    return {**kept, **credentials}


def response_headers(headers: httpx.Headers) -> list[tuple[str, str]]:
    """Upstream's response headers to give the client (rate limits, request ids, ...)."""
    return [(k, v) for k, v in headers.multi_items() if k.lower() not in _DROPPED_RESPONSE]


def timeout() -> httpx.Timeout:
    """Connect quickly, but let a long generation take its time."""
    read = float(getattr(settings, "CTXWEB_UPSTREAM_TIMEOUT_SECONDS", 600.0))
    return httpx.Timeout(read, connect=min(read, 15.0))
