"""How many of Django's requests a process runs at once (docs/deployment.md, "Requests at
once").

Under ASGI, Django runs each request's synchronous code in a thread of its own
(asgiref's ThreadSensitiveContext), all of them at once: twenty requests in flight are
twenty threads taking turns on one interpreter lock. A request's short write transaction
then lasts as long as the other threads keep it from running again after each database
call (bench/load.py measured 9 ms where alone it takes 2 ms), and every other writer waits
that long: on SQLite, all writers of every process do. So `admitted` lets at most `at_once`
requests run; the next ones wait in turn (first come, first served) in the event loop,
where waiting costs nothing. A request still running after `slot_seconds` (one that waits
for a summary model, or reads a large export) gives its place to the next one and goes on
outside the count, so a slow request never holds the others up longer than that.

Only Django's own requests are counted: the proxy and the MCP server (ctxweb/asgi.py)
are asynchronous and run their few synchronous steps on executors of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

__all__ = ["admitted"]

# The shapes sessions_app/proxy/pool.py gives an ASGI application.
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def admitted(app: ASGIApp, at_once: int, slot_seconds: float) -> ASGIApp:
    """`app`, running at most `at_once` HTTP requests at a time (0: no limit), each of
    them counted for at most `slot_seconds`."""
    if at_once <= 0:
        return app
    slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    async def admitting(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        # One semaphore per event loop: gunicorn's worker runs one, tests may run several.
        loop = asyncio.get_running_loop()
        slot = slots.setdefault(loop, asyncio.Semaphore(at_once))
        await slot.acquire()
        request = asyncio.ensure_future(app(scope, receive, send))
        try:
            try:
                await asyncio.wait({request}, timeout=slot_seconds)
            finally:
                slot.release()
            await asyncio.shield(request)
        except asyncio.CancelledError:  # the server stops: the request stops with it
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await request
            raise

    return admitting
