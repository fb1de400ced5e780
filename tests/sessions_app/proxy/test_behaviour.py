"""Proxy behaviour: compaction before the call, errors passed through, fail open, no keys kept."""

from __future__ import annotations

import json
import logging
from typing import Any

import anthropic
import pytest
from django.db import connection

from sessions_app.models import ApiKey, Compaction, CompactionProfile, Session
from sessions_app.services.proxying import turns as proxying
from tests.sessions_app.proxy.conftest import small_default_profile
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_profile(transactional_db: Any) -> CompactionProfile:
    """The default profile: a 3000-token window, compacting at half, extractive summaries."""
    return small_default_profile()


def _words(turn: int) -> str:
    return " ".join(f"word{turn}x{i}" for i in range(120))


@pytest.mark.parametrize("stream", [False, True])
def test_long_conversation_is_compacted_before_the_call(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    small_profile: CompactionProfile,
    stream: bool,
) -> None:
    history: list[Any] = []
    answers = []
    for turn in range(12):
        upstream_anthropic.enqueue(Reply.text(f"answer {turn}"))
        history.append({"role": "user", "content": f"turn {turn}: {_words(turn)}"})
        reply: Any
        if stream:
            with claude.messages.stream(model="m", max_tokens=20, messages=history) as s:
                reply = s.get_final_message()
        else:
            reply = claude.messages.create(model="m", max_tokens=20, messages=history)
        answers.append(reply.content[0].text)
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
    assert answers == [f"answer {turn}" for turn in range(12)]
    session = Session.objects.get()
    assert Compaction.objects.filter(session=session, status="succeeded").exists()
    last = upstream_anthropic.requests[-1].body
    client_sent = len(json.dumps(history[:-1]))
    assert len(json.dumps(last["messages"])) < client_sent / 2
    # The untouched tail is the client's own messages, byte for byte.
    assert last["messages"][-1] == history[-2]
    assert session.message_count == 24


def test_the_system_prompt_and_tools_count_toward_compacting_before_the_call(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    small_profile: CompactionProfile,
    scripted: Any,
) -> None:
    # A big tool definition beside a short conversation, as Claude Code sends: the messages
    # alone stay under the 1500-token threshold, with the tools they are over it.
    scripted(default="Short summary.")
    small_profile.prepare_at = None  # compacted in the request (prepared: test_prepared_*)
    small_profile.save(update_fields=["prepare_at"])
    tools: Any = [
        {
            "name": "Read",
            "description": " ".join(f"detail{i}" for i in range(500)),
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    history: list[Any] = []
    for turn in range(8):
        upstream_anthropic.enqueue(Reply.text(f"answer {turn}"))
        history.append({"role": "user", "content": f"turn {turn}: " + "words " * 60})
        reply = claude.messages.create(model="m", max_tokens=20, messages=history, tools=tools)
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
    session = Session.objects.get()
    assert session.history_tokens < small_profile.context_limit * small_profile.trigger_ratio
    compaction = Compaction.objects.filter(session=session, status="succeeded").first()
    assert compaction is not None
    assert compaction.trigger == "auto"
    last = upstream_anthropic.requests[-1].body
    assert last["tools"] == tools  # forwarded as sent
    assert len(last["messages"]) < len(history) - 1


def test_rate_limit_passes_through_with_its_headers(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(Reply.rate_limited(retry_after="7", x_custom="kept"))
    with pytest.raises(anthropic.RateLimitError) as raised:
        claude.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    response = raised.value.response
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.headers["x-custom"] == "kept"
    assert response.json()["error"]["type"] == "rate_limit_error"


@pytest.mark.parametrize("status", [500, 529])
def test_server_errors_pass_through(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic, status: int
) -> None:
    reply = Reply.server_error() if status == 500 else Reply.overloaded()
    upstream_anthropic.script(reply)
    with pytest.raises(anthropic.APIStatusError) as raised:
        claude.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert raised.value.status_code == status


def test_fail_open_when_storage_fails(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("database is unavailable")

    monkeypatch.setattr(proxying, "append_locked", broken)
    upstream_anthropic.script(Reply.text("still answered"))
    messages: Any = [{"role": "user", "content": "hello"}]
    with caplog.at_level(logging.ERROR, logger="sessions_app"):
        reply = claude.messages.create(model="m", max_tokens=5, messages=messages)
    assert reply.content[0].text == "still answered"  # type: ignore[union-attr]
    assert upstream_anthropic.requests[0].body["messages"] == messages
    assert "forwarding the request unchanged" in caplog.text


def test_own_provider_key_goes_upstream_and_is_never_stored(
    proxy_server: Any,
    ctx_key: str,
    upstream_anthropic: StreamingAnthropic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = "sk-ant-callers-own-secret-key"
    client = anthropic.Anthropic(
        api_key=own,
        base_url=f"{proxy_server.url}/proxy/anthropic",
        default_headers={"X-Ctxweb-Key": ctx_key},
        max_retries=0,
    )
    with caplog.at_level(logging.DEBUG):
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    sent = upstream_anthropic.requests[0]
    assert sent.api_key == own
    assert "x-ctxweb-key" not in sent.headers
    assert Session.objects.count() == 1
    assert own not in caplog.text
    assert ctx_key not in caplog.text
    _assert_not_in_database(own)
    _assert_not_in_database(ctx_key)
    assert ApiKey.objects.count() == 1


def _assert_not_in_database(secret: str) -> None:
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        for table in tables:
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                assert secret not in repr(row), table


def test_a_host_outside_allowed_hosts_is_refused_before_anything_is_stored(
    proxy_server: Any, ctx_key: str, upstream_anthropic: StreamingAnthropic
) -> None:
    """The proxy's routes skip the middleware that checks ALLOWED_HOSTS elsewhere."""
    client = anthropic.Anthropic(
        api_key=ctx_key,
        base_url=f"{proxy_server.url}/proxy/anthropic",
        max_retries=0,
        default_headers={"Host": "rebound.example"},
    )
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert raised.value.response.json()["error"]["message"] == "host not allowed"
    assert upstream_anthropic.requests == []
    assert not Session.objects.exists()
