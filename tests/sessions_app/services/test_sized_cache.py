"""sessions_app.services.context.sized_cache: an LRU cache bounded by the total size of its
values."""

from __future__ import annotations

import threading

from sessions_app.services.context.sized_cache import SizedCache


def make(budget: list[int]) -> SizedCache[bytes]:
    return SizedCache(lambda: budget[0], len)


def test_values_are_returned_as_stored() -> None:
    cache = make([100])
    value = b"x" * 10
    cache.put("a", value)
    assert cache.get("a") is value
    assert cache.get("b") is None
    assert cache.total == 10


def test_the_least_recently_used_go_first_when_over_budget() -> None:
    cache = make([30])
    cache.put("a", b"a" * 10)
    cache.put("b", b"b" * 10)
    cache.put("c", b"c" * 10)
    assert cache.get("a") is not None  # now the most recently used
    cache.put("d", b"d" * 10)
    assert cache.get("b") is None
    assert [cache.get(k) is not None for k in "acd"] == [True, True, True]
    assert cache.total == 30


def test_replacing_a_key_counts_its_new_size_only() -> None:
    cache = make([100])
    cache.put("a", b"a" * 60)
    cache.put("a", b"a" * 70)
    assert cache.total == 70
    assert len(cache) == 1


def test_a_value_over_the_budget_is_not_stored_and_drops_the_old_one() -> None:
    cache = make([50])
    cache.put("a", b"a" * 10)
    cache.put("a", b"a" * 51)
    assert cache.get("a") is None
    assert cache.total == 0


def test_the_budget_is_read_on_every_put() -> None:
    budget = [100]
    cache = make(budget)
    cache.put("a", b"a" * 40)
    budget[0] = 50
    cache.put("b", b"b" * 40)
    assert cache.get("a") is None
    assert cache.get("b") is not None
    budget[0] = 0
    cache.put("c", b"c")
    assert cache.get("c") is None


def test_clear_forgets_everything() -> None:
    cache = make([100])
    cache.put("a", b"a")
    cache.clear()
    assert (cache.get("a"), cache.total, len(cache)) == (None, 0, 0)


def test_concurrent_puts_keep_the_total_right() -> None:
    cache = make([500])

    def fill(offset: int) -> None:
        for n in range(300):
            cache.put((offset, n % 40), b"v" * (1 + n % 7))
            cache.get((offset, (n * 3) % 40))

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = [cache.get((t, n)) for t in range(4) for n in range(40)]
    assert cache.total == sum(len(v) for v in stored if v is not None) <= 500
