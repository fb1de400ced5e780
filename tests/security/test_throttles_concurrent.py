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

import pytest

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
