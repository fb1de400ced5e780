"""The transparent proxy under the production server (gunicorn, ASGI by default): a
streamed answer reaches the client event by event, and the conversation is stored."""

from __future__ import annotations

import time
from collections.abc import Iterator
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
