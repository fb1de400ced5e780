"""Throttles hold under concurrency: ctxweb served as deployed (gunicorn, two workers, the
database cache) on a SQLite file and on PostgreSQL, hit by many clients at once.

Each count is raised and read in one atomic step (sessions_app/counters.py), so exactly the
limit gets through, however many requests arrive together. Django's database cache counted
with a read then a write: 60 bad keys at once let about 40 through as 401 instead of 20.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from sessions_app import counters
from sessions_app.models import RateCounter
from tests.deploy.conftest import (  # noqa: F401 (fixtures)
    PROXIED,
    Gunicorn,
    any_database,
    gunicorn,
    pg_database,
    processes,
)

pytestmark = pytest.mark.slow

FAILURE_LIMIT = 20
COMPACT_LIMIT = 5


def _request(port: int, method: str, path: str, headers: dict[str, str], body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body or None, headers={**PROXIED, **headers})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _all_at_once(count: int, call: Callable[[], int]) -> Counter[int]:
    """The statuses of `count` calls started together (one thread each)."""
    start = threading.Barrier(count)
    statuses: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        start.wait()
        status = call()
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=client) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return Counter(statuses)


def test_concurrent_bad_keys_get_exactly_the_limit_of_401s(
    gunicorn: Gunicorn,  # noqa: F811
    any_database: str,  # noqa: F811
) -> None:
    served = gunicorn(
        any_database, workers=2, seed_user="thrott", CTXWEB_AUTH_FAILURE_LIMIT=str(FAILURE_LIMIT)
    )
    assert_bad_keys_at_once_get_the_limit(served)


def assert_bad_keys_at_once_get_the_limit(served: Any) -> None:
    """60 bad keys with a real key's prefix at once: exactly the limit answered 401, the rest
    429; then the valid key passes."""
    lookup = served.key.split("_")[1]  # ctx_<lookup>_<secret>: a bad key with a real prefix
    bad = {"Authorization": f"Bearer ctx_{lookup}_not-the-secret"}

    statuses = _all_at_once(60, lambda: _request(served.port, "GET", "/api/sessions", bad, b""))

    assert statuses == Counter({401: FAILURE_LIMIT, 429: 60 - FAILURE_LIMIT}), statuses
    good = {"Authorization": f"Bearer {served.key}"}
    assert _request(served.port, "GET", "/api/sessions", good, b"") == 200, "a valid key passes"


def test_concurrent_compactions_get_exactly_the_limit_through(
    gunicorn: Gunicorn,  # noqa: F811
    any_database: str,  # noqa: F811
) -> None:
    served = gunicorn(
        any_database,
        workers=2,
        seed_user="compacter",
        CTXWEB_THROTTLE_COMPACT=f"{COMPACT_LIMIT}/hour",
    )
    headers = {"Authorization": f"Bearer {served.key}", "Content-Type": "application/json"}
    body = json.dumps({"messages": [{"role": "user", "content": "hello"}]}).encode()
    _away_from_the_hour()

    statuses = _all_at_once(
        20, lambda: _request(served.port, "POST", "/api/compact", headers, body)
    )

    assert statuses == Counter({200: COMPACT_LIMIT, 429: 20 - COMPACT_LIMIT}), statuses


def _away_from_the_hour() -> None:
    """Wait while the hour is about to turn: the window is the clock's hour, and requests
    on both sides of its end would be counted in two windows."""
    while time.time() % 3600 > 3600 - 30:
        time.sleep(1)


@pytest.fixture
def in_the_table(db: Any, settings: Any) -> None:
    """The database cache: the counts go to the RateCounter table."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "ctxweb_cache",
        }
    }
    assert not counters.counted_in_cache()


def test_a_table_counter_restarts_when_its_window_ends_and_old_rows_go(
    in_the_table: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [counters.count(["a", "b"], 60).value for _ in range(3)] == [1, 2, 3]
    first = counters.count(["a"], 60)
    assert first.value == 4
    assert 0 < first.retry_after <= 60
    RateCounter.objects.filter(key="a").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert counters.count(["a"], 60).value == 1, "a new window"
    assert counters.count(["a", "b"], 60).value == 4, "the highest of the two"
    counters.uncount(["a", "b"])
    assert RateCounter.objects.get(key="b").count == 3

    long_ago = timezone.now() - timedelta(hours=2)
    RateCounter.objects.filter(key="b").update(expires_at=long_ago)
    monkeypatch.setattr(counters, "_SWEEP_CHANCE", 1.0)
    counters.count(["c"], 60)
    assert set(RateCounter.objects.values_list("key", flat=True)) == {"a", "c"}
