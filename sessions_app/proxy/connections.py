"""Where the proxy's synchronous steps run, and what happens to their database connections.

A proxied request has two synchronous steps: storing the conversation before the call
(`views._prepared`) and recording the answer after it (`recorder.Recording.store`).

Under the ASGI server Django runs a request's synchronous code in a thread made for that
request (asgiref's ThreadSensitiveContext), so each request would open its database
connection afresh: on SQLite a new connection, its PRAGMAs and Django's per-connection
set-up, about a millisecond of the proxy's added latency (bench/proxy.py), and none of
SQLite's prepared statements reused. So under ASGI the steps run on a few long-lived
threads of their own (`step`), each keeping its SQLite connection from one request to the
next. A pooled connection (PostgreSQL under ASGI: docs/deployment.md) goes back to its pool
as soon as a step returns: a proxied answer may take minutes upstream, and a connection held
meanwhile would starve every other request of the process. Any other connection of these
threads (PostgreSQL without a pool) is closed after each step, as Django closes a request's.

Elsewhere (WSGI, the test client) a step runs where Django runs any synchronous code of the
request, and hands back its pooled connections when it returns (`released`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["released", "step"]

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
        return sync_to_async(_kept(function), thread_sensitive=False, executor=_steps)
    return sync_to_async(released(function))


def released(function: Callable[P, T]) -> Callable[P, T]:
    """`function`; when it returns or raises, this thread's pooled connections go back to
    their pool (a connection that is not pooled, or inside a transaction, is left alone)."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            _hand_back(keep_sqlite=False)

    return call


def _kept(function: Callable[P, T]) -> Callable[P, T]:
    """`function`; afterwards only a usable SQLite connection stays open on this thread."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            _hand_back(keep_sqlite=True)

    return call


def _hand_back(*, keep_sqlite: bool) -> None:
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        pooled = connection.settings_dict.get("OPTIONS", {}).get("pool")
        if pooled:
            connection.close()
        elif not keep_sqlite:
            continue
        elif connection.vendor != "sqlite" or not _reusable(connection):
            connection.close()


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
