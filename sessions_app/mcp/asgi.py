"""The MCP server's route in the ASGI app: streamable HTTP at `/mcp` (ctxweb/asgi.py, so
`make run`'s devserver and production both serve it).

Stateless and answered as JSON: every request stands alone, so any worker process of a
deployment can answer any request (no MCP session lives in one process's memory). Each
request is authenticated before the MCP SDK sees it: a ctxweb API key as a bearer token
(`sessions_app.auth.authenticate_key`), 401 without a valid one and 429 past the failed
attempts limit that the API and the proxy count too; the Host header must be one of
ALLOWED_HOSTS, as Django checks for its own routes. The SDK's session manager runs in a
task of each event loop that serves the route (started with the first request; stopped
at the lifespan's end).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest
from django.http.request import split_domain_port, validate_host
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from sessions_app.auth import authenticate_key, refuse_failed

from .server import USER_KEY, build_server, on_worker

__all__ = ["PATH", "with_mcp_route"]

PATH: Final = "/mcp"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class _Running:
    """One event loop's session manager, served by a task until `stop` is set."""

    manager: StreamableHTTPSessionManager
    started: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class McpRoute:
    """The `/mcp` endpoint: authentication, then the MCP SDK's streamable HTTP transport."""

    def __init__(self, server: MCPServer | None = None) -> None:
        self._server = server or build_server()
        self._running: dict[asyncio.AbstractEventLoop, _Running] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not getattr(settings, "CTXWEB_MCP_ENABLED", True):
            await _answer(send, 404, {"error": "the MCP server is not enabled"})
            return
        if not _allowed_host(scope):
            await _answer(send, 400, {"error": "Host not allowed"})
            return
        user, refusal = await on_worker(_authenticated)(scope)
        if refusal is not None:
            status, headers = refusal
            await _answer(send, status, {"error": "a valid ctxweb API key is required"}, headers)
            return
        running = await self._manager()
        await running.manager.handle_request({**scope, USER_KEY: user}, receive, send)

    async def _manager(self) -> _Running:
        loop = asyncio.get_running_loop()
        running = self._running.get(loop)
        if running is None:
            self._server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                # The Host is checked against ALLOWED_HOSTS above, as Django does.
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            running = self._running[loop] = _Running(self._server.session_manager)
            running.task = loop.create_task(self._serve(running))
        await running.started.wait()
        return running

    @staticmethod
    async def _serve(running: _Running) -> None:
        async with running.manager.run():
            running.started.set()
            await running.stop.wait()

    async def shutdown(self) -> None:
        """Stop this event loop's session manager, if it runs."""
        running = self._running.pop(asyncio.get_running_loop(), None)
        if running is not None and running.task is not None:
            running.stop.set()
            await running.task


def with_mcp_route(app: Asgi, route: McpRoute | None = None) -> Asgi:
    """`app`, with `/mcp` answered by the MCP server."""
    mcp = route or McpRoute()

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") in (PATH, f"{PATH}/"):
            await mcp(scope, receive, send)
        elif scope["type"] == "lifespan":
            await app(scope, receive, _stopping_first(send, mcp))
        else:
            await app(scope, receive, send)

    return application


def _stopping_first(send: Send, mcp: McpRoute) -> Send:
    """`send`, stopping the MCP session manager before the server hears of the shutdown."""

    async def sending(message: Mapping[str, Any]) -> None:
        if message.get("type") == "lifespan.shutdown.complete":
            await mcp.shutdown()
        await send(message)

    return sending


def _authenticated(scope: Scope) -> tuple[Any, tuple[int, dict[str, str]] | None]:
    """(the key's user, None), or (None, (status, headers)) refusing the request."""
    headers = _headers(scope)
    scheme, _, key = headers.get("authorization", "").partition(" ")
    key = key.strip() if scheme.lower() == "bearer" else ""
    user = authenticate_key(key) if key else None
    if user is not None:
        return user, None
    throttled = refuse_failed(_request(scope, headers), key or None)
    if throttled is not None:
        return None, (429, {"retry-after": str(throttled.retry_after)})
    return None, (401, {"www-authenticate": 'Bearer realm="ctxweb"'})


def _request(scope: Scope, headers: Mapping[str, str]) -> HttpRequest:
    """The request as the failure counter reads it: the client's address."""
    request = HttpRequest()
    client = scope.get("client") or ("unknown", 0)
    request.META = {
        "REMOTE_ADDR": client[0],
        "HTTP_X_FORWARDED_FOR": headers.get("x-forwarded-for", ""),
    }
    return request


def _headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1")
        for name, value in scope.get("headers", [])
    }


def _allowed_host(scope: Scope) -> bool:
    host = _headers(scope).get("host", "")
    domain, _ = split_domain_port(host)
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


async def _answer(
    send: Send, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None
) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
