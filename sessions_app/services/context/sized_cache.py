"""A thread-safe, in-process least-recently-used cache bounded by the total size of its values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SizedCache"]

V = TypeVar("V")


class SizedCache(Generic[V]):
    """At most `budget()` units (bytes, say) of values; the least recently used go first.

    Values are stored as they are (no copy, no pickling): store only immutable ones.
    `budget` is read on every `put`, so a setting changed at run time applies at once;
    a value larger than the whole budget is not stored, and a budget of 0 stores nothing.
    """

    def __init__(self, budget: Callable[[], int], size: Callable[[V], int]) -> None:
        self._budget = budget
        self._size = size
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """The value under `key` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: V) -> None:
        """Store `value` under `key`, evicting the least recently used to stay in budget."""
        size = self._size(value)
        budget = self._budget()
        with self._lock:
            self._discard(key)
            if size > budget:
                return
            self._items[key] = (value, size)
            self._total += size
            while self._total > budget:
                oldest = next(iter(self._items))
                self._discard(oldest)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()
            self._total = 0

    @property
    def total(self) -> int:
        """The summed size of the stored values."""
        return self._total

    def __len__(self) -> int:
        return len(self._items)

    def _discard(self, key: Hashable) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self._total -= item[1]
