"""A slow stream goes out event by event as it arrives (issue 23 item 8): an upstream that
drips its server-sent events over about 3 s, and the time each event reaches the client.
Here under uvicorn in-process (tests/support/asgi_server.py); tests/deploy/test_drip_served.py
runs the same drip under gunicorn and under `make run`'s devserver."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.support.asgi_server import AsgiServer
from tests.support.fake_anthropic import Reply
from tests.support.fake_openai import ChatReply
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds between two upstream events: 11 Anthropic events take about 3 s.
DRIP = 0.3
TEXT = "one two three four five six"


def arrivals(url: str, headers: dict[str, str], body: dict[str, Any]) -> list[float]:
    """When each server-sent event (its blank line) reached the client."""
    times: list[float] = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line == "":
                times.append(time.monotonic())
    return times


def assert_dripped(times: list[float], sent_at: list[float]) -> None:
    """Each event reached the client soon after the upstream sent it, not all at the end
    (margins generous for a loaded machine: the drip lasts about 3 s)."""
    assert len(times) == len(sent_at) >= 8
    assert sent_at[-1] - sent_at[0] > 2.0
    assert times[0] < sent_at[-1] - 1.2  # the first one long before the last was sent
    late = [round(t - s, 2) for t, s in zip(times, sent_at, strict=True) if t - s > 1.0]
    assert not late, late


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_dripped_stream_reaches_the_client_event_by_event(
    proxy_server: AsgiServer,
    upstream_anthropic: StreamingAnthropic,
    upstream_openai: StreamingOpenAI,
    ctx_key: str,
    provider: str,
) -> None:
    headers = {"authorization": f"Bearer {ctx_key}"}
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": "drip"}],
    }
    upstream: Any = upstream_anthropic if provider == "anthropic" else upstream_openai
    upstream.event_delay = DRIP
    upstream.script(Reply.text(TEXT) if provider == "anthropic" else ChatReply.text(TEXT))
    path = "anthropic/v1/messages" if provider == "anthropic" else "openai/v1/chat/completions"
    times = arrivals(f"{proxy_server.url}/proxy/{path}", headers, body)
    assert_dripped(times, upstream.sent_at)
