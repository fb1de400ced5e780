"""Pooled database connections are handed back between the proxy's steps.

Under the ASGI server each request's synchronous steps run in a thread of their own with
connections from a pool of CTXWEB_DB_POOL_SIZE per process (docs/deployment.md). Django
hands a request's connection back when the response ends; a proxied answer may take
minutes upstream, and a connection held meanwhile starves every other request of the
process. So each step the proxy runs in a thread (storing the conversation, recording the
answer) hands its pooled connections back as soon as it returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import connections

__all__ = ["released"]

P = ParamSpec("P")
T = TypeVar("T")


def released(function: Callable[P, T]) -> Callable[P, T]:
    """`function`; when it returns or raises, this thread's pooled connections go back to
    their pool (a connection that is not pooled, or inside a transaction, is left alone)."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            _hand_back()

    return call


def _hand_back() -> None:
    for connection in connections.all(initialized_only=True):
        pooled = connection.settings_dict.get("OPTIONS", {}).get("pool")
        if pooled and not connection.in_atomic_block:
            connection.close()
