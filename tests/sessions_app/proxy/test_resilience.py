"""Timeouts, time to first byte, and the proxy with its database unavailable."""

from __future__ import annotations

import logging
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper

from sessions_app.models import Session
from tests.support.asgi_server import AsgiServer
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def short_timeout(settings: Any) -> None:
    """Upstream may take 0.5 s at most."""
    settings.CTXWEB_UPSTREAM_TIMEOUT_SECONDS = 0.5


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_timeout_is_a_504_in_anthropics_format(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    short_timeout: None,
    stream: bool,
) -> None:
    upstream_anthropic.script(Reply.hang(3.0))
    with pytest.raises(anthropic.APIStatusError) as raised:
        claude.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}], stream=stream
        )
    assert raised.value.status_code == 504
    assert raised.value.response.json()["error"]["type"] == "timeout_error"


def test_upstream_timeout_is_a_504_in_openais_format(
    gpt: openai.OpenAI, upstream_openai: StreamingOpenAI, short_timeout: None
) -> None:
    upstream_openai.script(Reply.hang(3.0))
    with pytest.raises(openai.APIStatusError) as raised:
        gpt.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert raised.value.status_code == 504
    error = raised.value.response.json()["error"]
    assert error["type"] == "timeout"
    assert error["code"] == "timeout_error"


def test_first_byte_reaches_the_client_before_upstream_ends(
    proxy_server: AsgiServer, ctx_key: str, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.event_delay = 0.15
    upstream_anthropic.script(Reply.text("twenty five characters..."))  # 5 text deltas
    body = {
        "model": "m",
        "max_tokens": 5,
        "stream": True,
        "messages": [{"role": "user", "content": "x"}],
    }
    url = f"{proxy_server.url}/proxy/anthropic/v1/messages"
    first: float | None = None
    with httpx.stream("POST", url, json=body, headers={"x-api-key": ctx_key}, timeout=10) as r:
        assert r.status_code == 200
        for chunk in r.iter_raw():
            if chunk and first is None:
                first = time.monotonic()
    assert first is not None
    sent = upstream_anthropic.sent_at
    assert len(sent) >= 9
    # The first event is out well before upstream sends its last one (9+ events, 0.15 s apart).
    assert first < sent[-1] - 0.6
    assert first - sent[0] < 0.5


def test_fail_open_with_the_database_unavailable(
    proxy_server: AsgiServer,
    ctx_key: str,
    upstream_anthropic: StreamingAnthropic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = "sk-ant-own-key-while-db-down"
    client = anthropic.Anthropic(
        api_key=own,
        base_url=f"{proxy_server.url}/proxy/anthropic",
        default_headers={"X-Ctxweb-Key": ctx_key},
        max_retries=0,
    )
    upstream_anthropic.script(Reply.text("answered anyway"), Reply.text("streamed anyway"))
    messages: Any = [{"role": "user", "content": "hello"}]
    with caplog.at_level(logging.ERROR, logger="sessions_app"), _down():
        reply = client.messages.create(model="m", max_tokens=5, messages=messages)
        with client.messages.stream(model="m", max_tokens=5, messages=messages) as s:
            streamed = s.get_final_message()
    assert reply.content[0].text == "answered anyway"  # type: ignore[union-attr]
    assert streamed.content[0].text == "streamed anyway"  # type: ignore[union-attr]
    assert [r.body["messages"] for r in upstream_anthropic.requests] == [messages, messages]
    assert upstream_anthropic.requests[0].api_key == own
    assert "keys cannot be checked" in caplog.text
    assert own not in caplog.text
    assert ctx_key not in caplog.text
    assert not Session.objects.exists()


def test_server_key_is_not_lent_while_keys_cannot_be_checked(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    with _down(), pytest.raises(anthropic.APIStatusError) as raised:
        claude.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert raised.value.status_code == 503
    assert raised.value.response.json()["type"] == "error"
    assert upstream_anthropic.requests == []


def test_fail_open_when_only_storage_is_down(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key was checked, then every write fails: the request still goes through."""
    from sessions_app.proxy import views

    real = views.plan_request  # type: ignore[attr-defined]

    def failing(*args: Any, **kwargs: Any) -> Any:
        with _down():
            return real(*args, **kwargs)

    monkeypatch.setattr(views, "plan_request", failing)
    upstream_anthropic.script(Reply.text("fine"))
    reply = claude.messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "store me"}]
    )
    assert reply.content[0].text == "fine"  # type: ignore[union-attr]
    assert not Session.objects.exists()


class _down:
    """Every query of every thread raises OperationalError inside the block."""

    def __enter__(self) -> None:
        self._patch = pytest.MonkeyPatch()
        self._patch.setattr(CursorWrapper, "execute", _unavailable)
        self._patch.setattr(CursorWrapper, "executemany", _unavailable)

    def __exit__(self, *exc: object) -> None:
        self._patch.undo()


def _unavailable(*args: Any, **kwargs: Any) -> None:
    raise OperationalError("connection to the database failed")
