"""A dripped stream (issue 23 item 8) under the production server (gunicorn with uvicorn
workers) and under `make run`'s devserver: each event reaches the client as the upstream
sends it (tests/sessions_app/proxy/test_drip.py: the same under uvicorn in-process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sessions_app.proxy.test_devserver import ROOT, _free_port, _manage, _wait_for
from tests.sessions_app.proxy.test_drip import DRIP, TEXT, arrivals, assert_dripped
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

from .conftest import Gunicorn

pytestmark = pytest.mark.slow

BODY = {
    "model": "m",
    "max_tokens": 50,
    "stream": True,
    "messages": [{"role": "user", "content": "drip"}],
}


@pytest.fixture
def upstream() -> Iterator[StreamingAnthropic]:
    with StreamingAnthropic() as fake:
        fake.event_delay = DRIP
        fake.script(Reply.text(TEXT))
        yield fake


def test_gunicorn_relays_a_drip_event_by_event(
    tmp_path: Path, gunicorn: Gunicorn, upstream: StreamingAnthropic
) -> None:
    served = gunicorn(
        f"sqlite:///{tmp_path / 'db.sqlite3'}",
        seed_user="dripped",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server",
    )
    headers = {"x-api-key": served.key, "Host": "127.0.0.1", "X-Forwarded-Proto": "https"}
    url = f"http://127.0.0.1:{served.port}/proxy/anthropic/v1/messages"
    assert_dripped(arrivals(url, headers, BODY), upstream.sent_at)


def test_devserver_relays_a_drip_event_by_event(
    tmp_path: Path, upstream: StreamingAnthropic
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "PYTEST_XDIST_WORKER"}}
    env.update(
        CTXWEB_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        DJANGO_DEBUG="1",
        PYTHONPATH=str(ROOT),
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server-key",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
    )
    _manage(env, "migrate", "--no-input")
    key = _manage(env, "create_api_key", "alice").strip().splitlines()[-1]
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "devserver", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the autoreloader's child is in its group
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/api/health", server)
        times = arrivals(f"{base}/proxy/anthropic/v1/messages", {"x-api-key": key}, BODY)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    assert_dripped(times, upstream.sent_at)
