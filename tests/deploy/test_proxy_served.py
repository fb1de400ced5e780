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

from .conftest import (
    PYTHON,
    Processes,
    free_port,
    manage,
    production_env,
    shell_call,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def upstream() -> Iterator[StreamingAnthropic]:
    with StreamingAnthropic() as fake:
        yield fake


def _answers(port: int) -> bool:
    try:
        response = httpx.get(
            f"http://127.0.0.1:{port}/api/health",
            headers={"Host": "127.0.0.1", "X-Forwarded-Proto": "https"},
            timeout=5,
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def test_gunicorn_streams_proxied_answers_as_they_come(
    tmp_path: Path, processes: Processes, upstream: StreamingAnthropic
) -> None:
    port = free_port()
    env = production_env(
        tmp_path,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CTXWEB_BIND=f"127.0.0.1:{port}",
        CTXWEB_WEB_WORKERS="1",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server",
    )
    manage(env, "migrate", "--no-input", "-v", "0")
    key = shell_call(env, "seed_user", "proxied")["key"]
    server = processes.start(
        "gunicorn", [PYTHON, "-m", "gunicorn", "-c", "ctxweb/gunicorn.conf.py"], env
    )
    wait_for(lambda: _answers(port) or server.poll() is not None, 60, "gunicorn to answer")
    assert server.poll() is None, processes.log("gunicorn")[-3000:]

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
