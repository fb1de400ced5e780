"""Where the proxy's synchronous steps run, and what happens to their database connections.

A proxied request has two synchronous steps: storing the conversation before the call
(`views._prepared`) and recording the answer after it (`recorder.Recording.store`).

Under the ASGI server Django runs a request's synchronous code in a thread made for that
request (asgiref's ThreadSensitiveContext), so each request would open its database
connection afresh: on SQLite a new connection, its PRAGMAs and Django's per-connection
set-up, a measurable part of the proxy's added latency (bench/proxy.py), and none of
SQLite's prepared statements reused. So under ASGI the steps run on a few long-lived
threads of their own (`step`), each keeping its SQLite connection from one request to the
next. A pooled connection (PostgreSQL under ASGI: docs/deployment.md) goes back to its pool
as soon as a step returns: a proxied answer may take minutes upstream, and a connection held
meanwhile would starve every other request of the process. Any other connection of these
threads (PostgreSQL without a pool) is closed after each step, as Django closes a request's.

Elsewhere (WSGI, the test client) a step runs where Django runs any synchronous code of the
request, and hands back its pooled connections when it returns.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["step"]

P = ParamSpec("P")
T = TypeVar("T")

#: Threads for the proxy's steps per process, made as needed. A step that compacts waits
#: for the summary model, so there are more than the process has requests storing at once.
STEP_THREADS: Final = 32
_steps = ThreadPoolExecutor(max_workers=STEP_THREADS, thread_name_prefix="ctxweb-proxy")


def step(function: Callable[P, T], *, asgi: bool) -> Callable[P, Awaitable[T]]:
    """`function` as a coroutine function: on the proxy's own threads under ASGI (their
    SQLite connections kept), else as Django runs a request's synchronous code."""
    if asgi:
        kept = _handing_back(function, own_thread=True)
        return sync_to_async(kept, thread_sensitive=False, executor=_steps)
    return sync_to_async(_handing_back(function, own_thread=False))


def _handing_back(function: Callable[P, T], *, own_thread: bool) -> Callable[P, T]:
    """`function`; when it returns or raises, this thread's pooled connections go back to
    their pool. On the proxy's `own_thread`, any other connection is closed too, but a
    usable SQLite one; elsewhere they are left to Django. A connection inside a
    transaction is left alone."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block and _to_close(connection, own_thread):
                    connection.close()

    return call


def _to_close(connection: BaseDatabaseWrapper, own_thread: bool) -> bool:
    if connection.settings_dict.get("OPTIONS", {}).get("pool"):
        return True
    return own_thread and not (connection.vendor == "sqlite" and _reusable(connection))


def _reusable(connection: BaseDatabaseWrapper) -> bool:
    """What Django's `close_if_unusable_or_obsolete` checks, but the connection's age."""
    if connection.connection is None:
        return True
    if connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]:
        return False
    if connection.errors_occurred:
        if not connection.is_usable():
            return False
        connection.errors_occurred = False
    return True
