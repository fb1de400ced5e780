"""The transparent proxy under the production server (gunicorn, ASGI by default): a
streamed answer reaches the client event by event, and the conversation is stored."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

from .conftest import Gunicorn, shell_call

pytestmark = pytest.mark.slow


@pytest.fixture
def upstream() -> Iterator[StreamingAnthropic]:
    with StreamingAnthropic() as fake:
        yield fake


def test_gunicorn_streams_proxied_answers_as_they_come(
    tmp_path: Path, gunicorn: Gunicorn, upstream: StreamingAnthropic
) -> None:
    served = gunicorn(
        f"sqlite:///{tmp_path / 'db.sqlite3'}",
        seed_user="proxied",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server",
    )
    port, env, key = served.port, served.env, served.key

    upstream.event_delay = 0.15
    upstream.script(Reply.text("streamed through gunicorn"))
    body = {
        "model": "m",
        "max_tokens": 20,
        "stream": True,
        "messages": [{"role": "user", "content": "hello"}],
    }
    headers = {"x-api-key": key, "Host": "127.0.0.1", "X-Forwarded-Proto": "https"}
    url = f"http://127.0.0.1:{port}/proxy/anthropic/v1/messages"
    first: float | None = None
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200, response.read()
        for chunk in response.iter_raw():
            if chunk and first is None:
                first = time.monotonic()
    assert first is not None
    assert first < upstream.sent_at[-1] - 0.6  # not buffered until upstream finished
    assert upstream.requests[0].api_key == "sk-ant-server"
    report = shell_call(env, "sessions_report", 2)  # the question and the streamed answer
    assert len(report) == 1, "the conversation was not stored"
    assert list(report.values()) == [[]]


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_the_same_first_request_sent_at_once_starts_one_session(
    tmp_path: Path,
    gunicorn: Gunicorn,
    upstream: StreamingAnthropic,
    database: str,
    request: pytest.FixtureRequest,
) -> None:
    # A client that sends its first request twice at once (a retry racing the original)
    # must not get two sessions: starts are taken in turn (services/proxying/turns.py).
    url = (
        f"sqlite:///{tmp_path / 'db.sqlite3'}"
        if database == "sqlite"
        else request.getfixturevalue("pg_database")
    )
    served = gunicorn(
        url,
        workers=2,
        seed_user="proxied",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server",
    )
    body = {
        "model": "m",
        "max_tokens": 20,
        "system": "You are an agent.",
        "tools": [{"name": "Read", "description": "Read.", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": "user_x_account__session_6f0c9d2e-3b1a-4c5d-8e7f-1a2b3c4d5e6f"},
        "messages": [{"role": "user", "content": "Start the work"}],
    }
    headers = {"x-api-key": served.key, "Host": "127.0.0.1", "X-Forwarded-Proto": "https"}
    endpoint = f"http://127.0.0.1:{served.port}/proxy/anthropic/v1/messages"
    clients = 6
    barrier = threading.Barrier(clients)

    def send(_: int) -> int:
        barrier.wait()
        return httpx.post(endpoint, json=body, headers=headers, timeout=60).status_code

    with ThreadPoolExecutor(clients) as pool:
        statuses = list(pool.map(send, range(clients)))

    assert statuses == [200] * clients
    report = shell_call(served.env, "sessions_report")
    assert list(report.values()) == [[]]  # one session, whole
