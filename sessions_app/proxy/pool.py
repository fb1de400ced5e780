"""One pooled upstream HTTP client per event loop, closed when the ASGI server shuts down.

Under ASGI every request of a worker runs on the server's one event loop, so a client per
loop reuses upstream connections (TLS set-up once, not per request). Under WSGI each request
runs its view on a loop of its own: the caller then takes a client for that request alone
(`pooled=False`) and closes it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import httpx

__all__ = ["close_upstream_clients", "upstream_client", "with_upstream_lifespan"]

#: Connections kept open per worker process (above it, connections close after use).
_KEEPALIVE: Final = 32
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def _new_client() -> httpx.AsyncClient:
    # Each request passes its own timeout (upstream.timeout()); none is set here.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=_KEEPALIVE)
    return httpx.AsyncClient(limits=limits, timeout=None)


def upstream_client(*, pooled: bool) -> httpx.AsyncClient:
    """The running loop's shared client (`pooled`), else a new one the caller closes."""
    if not pooled:
        return _new_client()
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = _clients[loop] = _new_client()
    return client


async def close_upstream_clients() -> None:
    """Close the running loop's shared client (server shutdown)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def with_upstream_lifespan(app: Asgi) -> Asgi:
    """`app` (Django's ASGI handler, which answers HTTP only) plus the ASGI lifespan
    protocol: at shutdown the pooled upstream client is closed."""

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await close_upstream_clients()
                await send({"type": "lifespan.shutdown.complete"})
                return

    return application
