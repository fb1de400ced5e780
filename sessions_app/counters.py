"""Throttle counters that hold under concurrency: each count is raised and read in one step.

`count(key, window)` adds one to the counter `key` (started by its first count, ended
`window` seconds later) and returns its new value, so a caller compares what it counted,
never a value another request may be counting past at the same moment. Where the counts
live (docs/deployment.md#throttles):

- Redis: every counter of a call raised by one Lua script (`INCR`, `EXPIRE` at the first
  count), which Redis runs alone.
- Memcached or per-process memory as the cache: the cache (`add` then `incr`: Memcached
  `incr`, a lock in memory; each atomic).
- any other cache (the database cache, files): the `RateCounter` table, one row per counter,
  raised by one `UPDATE ... SET count = count + 1` (a row lock on PostgreSQL, the write
  lock on SQLite) and read back in the same transaction. Django's database cache `incr`
  is a read then a write, and concurrent requests counted past the limit together.

Re-exported by sessions_app.models (where Django looks for the app's models).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.memcached import BaseMemcachedCache
from django.core.cache.backends.redis import RedisCache
from django.db import IntegrityError, models, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

__all__ = ["Count", "RateCounter", "count", "counted_in_cache", "uncount"]

#: One count in this many deletes the counters ended over an hour ago.
_SWEEP_CHANCE = 1 / 100
_SWEEP_AFTER_SECONDS = 3600
#: The cache backends whose `add` and `incr` are atomic.
_ATOMIC_CACHES = (RedisCache, BaseMemcachedCache, LocMemCache)


class RateCounter(models.Model):
    """One throttle counter (failed authentications, calls in a window) while the cache
    cannot count atomically; a row past `expires_at` starts again at its next count."""

    key = models.CharField(max_length=200, primary_key=True)
    count = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.count} until {self.expires_at:%Y-%m-%d %H:%M:%S}"


@dataclass(frozen=True)
class Count:
    """A counter's value after one count, and the seconds until it starts again."""

    value: int
    retry_after: int


def counted_in_cache() -> bool:
    """True when the counts live in the cache (one whose increments are atomic)."""
    # `cache` is a proxy; the backend itself is in `caches`.
    return isinstance(caches[DEFAULT_CACHE_ALIAS], _ATOMIC_CACHES)


def count(keys: Sequence[str], window: int) -> Count:
    """Add one to each counter of `keys` (each ended `window` seconds after its first
    count); the highest count after this one.

    In the table, the counters of one call are raised in one transaction, in the order
    given: concurrent calls are counted in the same order on every counter, so the calls
    within the limit on one are within it on the others.
    """
    window = max(1, int(window))
    if counted_in_cache():
        backend = caches[DEFAULT_CACHE_ALIAS]
        if isinstance(backend, RedisCache):
            return Count(_redis_count(backend, keys, window), window)
        return Count(max(_cache_count(key, window) for key in keys), window)
    _sweep()
    with transaction.atomic():
        counts = [_row_count(key, window) for key in keys]
    return max(counts, key=lambda counted: counted.value)


def uncount(keys: Sequence[str]) -> None:
    """Take back one count of each of `keys` (a login that turned out right), never below
    zero."""
    for key in keys:
        if counted_in_cache():
            with contextlib.suppress(ValueError):  # ended meanwhile: nothing to take back
                cache.decr(key)
        else:
            RateCounter.objects.filter(key=key, count__gt=0).update(count=F("count") - 1)


#: Raise every counter of a call in one atomic step (a Lua script runs alone in Redis), each
#: ending `window` seconds after its first count; the highest value after this count.
_REDIS_COUNT: Final = """
local top = 0
for _, key in ipairs(KEYS) do
  local value = redis.call('INCR', key)
  if value == 1 then redis.call('EXPIRE', key, ARGV[1]) end
  if value > top then top = value end
end
return top
"""


def _redis_count(backend: RedisCache, keys: Sequence[str], window: int) -> int:
    """The counters of `keys` raised together in Redis: with two counters (an address and a
    key prefix) raised one after the other, two requests in a burst could each see the
    other's count past the limit, and one fewer than the limit passed."""
    names = [backend.make_and_validate_key(key) for key in keys]
    client = backend._cache.get_client(names[0], write=True)
    return int(client.eval(_REDIS_COUNT, len(names), *names, window))


def _cache_count(key: str, window: int) -> int:
    if cache.add(key, 1, timeout=window):
        return 1
    try:
        return int(cache.incr(key))
    except ValueError:  # ended between add and incr: this count starts it again
        cache.add(key, 1, timeout=window)
        return 1


def _sweep() -> None:
    """Delete counters ended long ago, now and then; never one another request holds."""
    if random.random() >= _SWEEP_CHANCE:
        return
    ended = timezone.now() - timedelta(seconds=_SWEEP_AFTER_SECONDS)
    with transaction.atomic():
        held = RateCounter.objects.select_for_update(skip_locked=True)
        RateCounter.objects.filter(
            key__in=held.filter(expires_at__lt=ended).values("key")[:1000]
        ).delete()


def _row_count(key: str, window: int) -> Count:
    for _ in range(3):
        raised = _raise_row(key, window)
        if raised is not None:
            return raised
        try:
            with transaction.atomic():
                expires_at = timezone.now() + timedelta(seconds=window)
                RateCounter.objects.create(key=key, count=1, expires_at=expires_at)
            return Count(1, window)
        except IntegrityError:  # another request made the row first: count on it
            continue
    raise RuntimeError(f"rate counter {key!r} could not be raised")  # pragma: no cover


def _raise_row(key: str, window: int) -> Count | None:
    """One count on an existing row, in one statement (its lock held until the read)."""
    with transaction.atomic():  # a savepoint inside count's transaction
        now = timezone.now()
        ended = When(expires_at__lte=now, then=Value(1))
        restarted = When(expires_at__lte=now, then=Value(now + timedelta(seconds=window)))
        updated = RateCounter.objects.filter(key=key).update(
            count=Case(ended, default=F("count") + 1),
            expires_at=Case(restarted, default=F("expires_at")),
        )
        if not updated:
            return None
        value, expires_at = RateCounter.objects.values_list("count", "expires_at").get(key=key)
    return Count(int(value), _seconds_until(expires_at, now))


def _seconds_until(moment: datetime, now: datetime) -> int:
    return max(1, math.ceil((moment - now).total_seconds()))
