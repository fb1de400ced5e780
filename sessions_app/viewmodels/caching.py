"""A small per-session cache for view models that cost a scan of the whole history.

Keys carry the session's version and context revision (bumped by every append, compaction,
revert and offload), so a cached value is never stale: a change makes a new key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final, TypeVar

from django.core.cache import cache

from sessions_app.models import Session

__all__ = ["session_cached"]

T = TypeVar("T")
#: Entries outlive no change anyway; the timeout only bounds the memory they hold.
TIMEOUT: Final = 3600


def session_cached(session: Session, name: str, build: Callable[[], T], *parts: Hashable) -> T:
    """`build()` cached for this state of `session` (and any extra key `parts`)."""
    extra = ":".join(str(part) for part in parts)
    key = (
        f"ctxweb:{name}:{session.pk}:{session.version}:{session.context_revision}:"
        f"{session.message_count}:{session.context_tokens}:{extra}"
    )
    value: T | None = cache.get(key)
    if value is None:
        value = build()
        cache.set(key, value, TIMEOUT)
    return value
