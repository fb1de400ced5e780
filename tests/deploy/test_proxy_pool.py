"""The proxy under the production ASGI server holds no pooled database connection while it
waits for upstream: a slow answer must not starve the other requests of the process."""

from __future__ import annotations

import http.client
import json
import threading

import pytest

from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

from .conftest import PROXIED, Gunicorn, Processes

pytestmark = pytest.mark.slow


def _post(port: int, key: str, text: str) -> int:
    body = {
        "model": "claude-test",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {**PROXIED, "x-api-key": key, "content-type": "application/json"}
        connection.request("POST", "/proxy/anthropic/v1/messages", json.dumps(body), headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.mark.postgres
def test_requests_waiting_on_upstream_hold_no_pooled_connection(
    gunicorn: Gunicorn, processes: Processes, pg_database: str
) -> None:
    """A pool of one connection and three requests whose upstream answers after 3 s: each
    request stores its conversation, then waits on upstream without the connection, so all
    three are answered (holding it, the second and third found the pool empty for longer
    than CTXWEB_DB_POOL_TIMEOUT and were refused with a 503)."""
    with StreamingAnthropic() as upstream:
        upstream.script(*[Reply(content=[{"type": "text", "text": "ok"}], delay=3)] * 3)
        served = gunicorn(
            pg_database,
            seed_user="pooled",
            CTXWEB_DB_POOL_SIZE="1",
            CTXWEB_DB_POOL_TIMEOUT="1",
            CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
            CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server-key",
        )
        port, key = served.port, served.key

        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda n=n: statuses.append(_post(port, key, f"task {n}")))
            for n in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

    assert sorted(statuses) == [200, 200, 200], processes.log("gunicorn")[-3000:]
