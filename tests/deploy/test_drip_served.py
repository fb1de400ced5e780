"""A dripped stream (issue 23 item 8) under the production server (gunicorn with uvicorn
workers) and under `make run`'s devserver: each event reaches the client as the upstream
sends it (tests/sessions_app/proxy/test_drip.py: the same under uvicorn in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sessions_app.proxy.test_devserver import devserver
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
    with devserver(tmp_path, upstream.base_url) as (base, key):
        times = arrivals(f"{base}/proxy/anthropic/v1/messages", {"x-api-key": key}, BODY)
    assert_dripped(times, upstream.sent_at)
