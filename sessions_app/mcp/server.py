"""ctxweb's MCP server: four tools over the caller's stored sessions (issue 28).

The tools' names, parameters and descriptions are what a model sees (README, "Let the
agent look back"). Each call runs its selector or service on a worker thread (the ORM is
synchronous) as the owner the request authenticated (sessions_app/mcp/asgi.py puts the
user in the ASGI scope); a ServiceError is a tool error the model reads, never a 500.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from sessions_app.services.errors import InvalidInput, NotFound, ServiceError, Unavailable

from . import tools

__all__ = ["USER_KEY", "build_server", "on_worker"]

#: Where the ASGI route leaves the authenticated user in the request's scope.
USER_KEY: Final = "ctxweb.user"

P = ParamSpec("P")
T = TypeVar("T")

INSTRUCTIONS = (
    "ctxweb keeps every message of your sessions, including the ones compaction removed "
    "from your context. A summary ctxweb wrote names its session and range ('Earlier "
    "messages 12-340 are compacted as #3 of ctxweb session <id>'). Use search_history to "
    "find a detail, read_messages to read the originals, context_status to see how full "
    "the context is, compact_now to compact it yourself."
)

SessionId = Annotated[str, Field(description="The ctxweb session id (a UUID).")]
Index = Annotated[int | None, Field(ge=0, description="A message index (0 is the first).")]


def _owner(ctx: Context) -> Any:
    request = ctx.request_context.request
    return getattr(request, "scope", {}).get(USER_KEY)


def on_worker(function: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """`function` as a coroutine function run on a worker thread (the ORM is synchronous),
    closing the thread's database connections when it returns, as Django does at the end
    of a request: the worker threads outlive calls."""
    return sync_to_async(_closing(function), thread_sensitive=False)


async def _run(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` on a worker thread; a ServiceError becomes a ToolError."""
    try:
        return await on_worker(function)(*args)
    except InvalidInput as error:
        raise ToolError("; ".join(f"{p.path}: {p.message}" for p in error.problems)) from error
    except NotFound as error:
        raise ToolError(f"{error} (or not yours)") from error
    except Unavailable as error:
        raise ToolError(f"{error}; try again in {error.retry_after} s") from error
    except ServiceError as error:
        raise ToolError(str(error)) from error


def _closing(function: Callable[P, T]) -> Callable[P, T]:

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close()

    return call


async def search_history(
    ctx: Context,
    query: Annotated[str, Field(description="Words to find; every word must be in a message.")],
    session: Annotated[
        str | None, Field(description="Only this session (its id); default: all of yours.")
    ] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Most hits (newest first).")] = 20,
) -> dict[str, Any]:
    """Full-text search over your sessions' full histories, the messages compaction took
    out of the context included. Newest first; each hit gives the session id and title,
    the message index, role, time, the compaction that covers it (null: still in the
    context) and a snippet. Read around a hit with read_messages."""
    return await _run(tools.search_hits, _owner(ctx), query, session, limit)


async def read_messages(
    ctx: Context,
    session: SessionId,
    start: Index = None,
    end: Index = None,
    compaction: Annotated[
        int | None,
        Field(ge=1, description="Read what compaction #n covered (its original messages)."),
    ] = None,
) -> str:
    """The original messages of a session: indexes start..end (inclusive), or what
    compaction #n covered. Tool calls are one line each with their results; long texts are
    cut with a marker (ask for one message, start = end, to read it whole). Answers are
    paged: a last line says where the next page starts."""
    return await _run(tools.read_messages, _owner(ctx), session, start, end, compaction)


async def context_status(ctx: Context, session: SessionId) -> dict[str, Any]:
    """How full a session's context is: tokens now, the compaction threshold, the context
    limit, and its compactions (number, time, range of message indexes, tokens before and
    after)."""
    return await _run(tools.context_status, _owner(ctx), session)


async def compact_now(
    ctx: Context,
    session: SessionId,
    instructions: Annotated[
        str | None, Field(description="What the summary must keep (for ctxweb's summarizer).")
    ] = None,
    summary: Annotated[
        str | None,
        Field(description="Your own summary of the older messages; used instead of ctxweb's."),
    ] = None,
) -> dict[str, Any]:
    """Compact a session's context now: its older messages are replaced by a summary (ctxweb
    keeps the originals; read_messages reads them). Give instructions for ctxweb's
    summarizer, or write the summary yourself."""
    return await _run(tools.compact_now, _owner(ctx), session, instructions, summary)


def build_server() -> MCPServer:
    """The MCP server with its four tools."""
    server: MCPServer = MCPServer(name="ctxweb", instructions=INSTRUCTIONS)
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(search_history, annotations=reading)
    server.add_tool(read_messages, annotations=reading)
    server.add_tool(context_status, annotations=reading)
    server.add_tool(
        compact_now, annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False)
    )
    return server
