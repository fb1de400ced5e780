"""Throttles counted in a real Redis (CTXWEB_REDIS_URL): ctxweb under gunicorn with two
workers, many clients at once, exactly the limit of failures answered 401 (docs/deployment.md
#throttles says Redis is exact: `SET NX` then `INCR`, each atomic).

The Redis server of the machine (127.0.0.1:6379) is used, database 9, emptied first; the test
skips where none answers, except under CI, where one runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.deploy.conftest import (  # noqa: F401 (fixtures)
    Gunicorn,
    gunicorn,
    processes,
    sqlite_url,
)
from tests.security.test_throttles_concurrent import (
    FAILURE_LIMIT,
    assert_bad_keys_at_once_get_the_limit,
)

pytestmark = pytest.mark.slow

REDIS_URL = os.environ.get("CTXWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The URL of an emptied Redis database (skips, or fails under CI, when none answers)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Redis throttle test must run under CI: {REDIS_URL}: {error}")
        pytest.skip(f"no Redis at {REDIS_URL}: {error}")
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


def test_bad_keys_at_once_get_exactly_the_limit_of_401s_counted_in_redis(
    gunicorn: Gunicorn,  # noqa: F811
    sqlite_url: str,  # noqa: F811
    redis_url: str,
) -> None:
    served = gunicorn(
        sqlite_url,
        workers=2,
        seed_user="redisthrottle",
        CTXWEB_AUTH_FAILURE_LIMIT=str(FAILURE_LIMIT),
        CTXWEB_REDIS_URL=redis_url,
    )
    assert_bad_keys_at_once_get_the_limit(served)
    import redis

    keys = redis.Redis.from_url(redis_url).keys("*auth-failures*")
    assert keys, "the failures were counted in Redis, not elsewhere"
