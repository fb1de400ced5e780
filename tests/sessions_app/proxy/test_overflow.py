"""Overflow recovery through the proxy (issue 26 item 2, docs/behaviour.md#overflow-recovery).

The upstreams here are the streaming fakes with a window smaller than the session's
profile believes: they refuse a request whose messages are longer than `window` characters
as the real APIs do (Anthropic's 400 "prompt is too long", OpenAI's
`context_length_exceeded`). The real SDKs talk to ctxweb under uvicorn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from sessions_app.models import Compaction, CompactionProfile, Session
from sessions_app.proxy.overflow import Overflow, overflow_of
from tests.support.fake_anthropic import RecordedRequest, Reply
from tests.support.fake_openai import ChatReply
from tests.support.fake_server import ScriptedReply
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

#: Characters of messages the fake upstreams take (about 1,500 of their tokens).
WINDOW = 6000


def _size(request: RecordedRequest) -> int:
    body = request.body if isinstance(request.body, dict) else {}
    return len(json.dumps(body.get("messages") or []))


class NarrowAnthropic(StreamingAnthropic):
    """The Messages API of a model whose window is `window` characters of messages."""

    window = WINDOW

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        reply = super()._take(request)
        size = _size(request)
        if size <= self.window:
            return reply
        message = f"prompt is too long: {size // 4} tokens > {self.window // 4} maximum"
        return Reply.error(400, "invalid_request_error", message)


class NarrowOpenAI(StreamingOpenAI):
    """Chat Completions of a model whose window is `window` characters of messages."""

    window = WINDOW

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        reply = super()._take(request)
        size = _size(request)
        if size <= self.window:
            return reply
        message = (
            f"This model's maximum context length is {self.window // 4} tokens. However, "
            f"your messages resulted in {size // 4} tokens. Please reduce the length."
        )
        return ChatReply.error(400, message, code="context_length_exceeded")


@pytest.fixture
def narrow_anthropic(settings: Any) -> Iterator[NarrowAnthropic]:
    with NarrowAnthropic(Reply.text("fine")) as server:
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = server.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = "sk-ant-server-key"
        yield server


@pytest.fixture
def narrow_openai(settings: Any) -> Iterator[NarrowOpenAI]:
    with NarrowOpenAI(ChatReply.text("fine")) as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url.removesuffix("/v1")
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
        yield server


@pytest.fixture
def believes_more(transactional_db: Any) -> CompactionProfile:
    """The default profile: a window of 100,000 tokens (the upstream's is ~1,500)."""
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(
        name="believes-more",
        is_default=True,
        summarizer="extractive",
        context_limit=100_000,
        keep_recent_messages=2,
        tail_retention_ratio=0.1,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )


def _turn(turn: int) -> str:
    return f"turn {turn}: " + " ".join(f"w{turn}x{i}" for i in range(40))


@pytest.mark.parametrize("stream", [False, True])
def test_forty_turns_through_an_upstream_with_a_smaller_window_are_all_answered(
    claude: anthropic.Anthropic,
    narrow_anthropic: NarrowAnthropic,
    believes_more: CompactionProfile,
    stream: bool,
) -> None:
    turns = 40 if not stream else 20
    history: list[Any] = []
    answers = []
    for turn in range(turns):
        history.append({"role": "user", "content": _turn(turn)})
        if stream:
            with claude.messages.stream(model="m", max_tokens=20, messages=history) as s:
                reply: Any = s.get_final_message()
        else:
            reply = claude.messages.create(model="m", max_tokens=20, messages=history)
        answers.append(reply.content[0].text)
        history.append({"role": "assistant", "content": reply.content[0].text})
    assert answers == ["fine"] * turns
    session = Session.objects.get()
    assert session.message_count == 2 * turns  # nothing stored twice
    assert session.upstream_window is not None
    assert session.upstream_window < believes_more.context_limit
    overflow = Compaction.objects.filter(session=session, trigger="overflow", status="succeeded")
    assert overflow.exists()
    refused = [r for r in narrow_anthropic.requests if _size(r) > WINDOW]
    # The window learned, later compactions aim under it: few refusals, each retried once.
    assert len(narrow_anthropic.requests) == turns + len(refused)
    assert len(refused) < turns / 4


def test_a_retry_refused_again_gives_the_client_the_upstreams_own_error(
    claude: anthropic.Anthropic,
    narrow_anthropic: NarrowAnthropic,
    believes_more: CompactionProfile,
) -> None:
    narrow_anthropic.window = 10  # nothing fits
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": _turn(1)}]
        )
    assert "prompt is too long" in raised.value.response.json()["error"]["message"]
    assert len(narrow_anthropic.requests) <= 2  # one retry at most
    session = Session.objects.get()
    assert session.message_count == 1  # the request, once; no answer


def test_observe_mode_passes_the_refusal_through(
    proxy_server: Any,
    ctx_key: str,
    narrow_anthropic: NarrowAnthropic,
    believes_more: CompactionProfile,
) -> None:
    observing = anthropic.Anthropic(
        api_key=ctx_key,
        base_url=f"{proxy_server.url}/proxy/anthropic",
        max_retries=0,
        default_headers={"X-Ctxweb-Mode": "observe"},
    )
    long = " ".join(_turn(i) for i in range(40))
    with pytest.raises(anthropic.BadRequestError):
        observing.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": long}]
        )
    assert len(narrow_anthropic.requests) == 1
    session = Session.objects.get()
    assert session.upstream_window is None
    assert not Compaction.objects.filter(session=session).exists()


def test_openai_context_length_exceeded_is_recovered(
    gpt: openai.OpenAI, narrow_openai: NarrowOpenAI, believes_more: CompactionProfile
) -> None:
    history: list[Any] = [{"role": "system", "content": "You are terse."}]
    for turn in range(30):
        history.append({"role": "user", "content": _turn(turn)})
        reply = gpt.chat.completions.create(model="m", messages=history)
        assert reply.choices[0].message.content == "fine"
        history.append({"role": "assistant", "content": "fine"})
    session = Session.objects.get()
    assert session.message_count == 60
    assert session.upstream_window is not None
    assert Compaction.objects.filter(session=session, trigger="overflow").exists()


@pytest.mark.parametrize(
    ("provider", "status", "body", "expected"),
    [
        (
            "anthropic",
            400,
            Reply.prompt_too_long().body,
            Overflow("anthropic", "", limit=200000, counted=250000),
        ),
        (
            "anthropic",
            400,
            Reply.error(
                400,
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
            ).body,
            Overflow("anthropic", "", limit=200000 - 8192, counted=198000),
        ),
        (
            "openai",
            400,
            ChatReply.context_exceeded().body,
            Overflow("openai", "", limit=8192, counted=12000),
        ),
        (
            "responses",
            200,
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "context_length_exceeded", "message": "too long"},
                },
            },
            Overflow("responses", ""),
        ),
        ("anthropic", 400, Reply.error(400, "invalid_request_error", "bad field").body, None),
        ("anthropic", 429, Reply.rate_limited().body, None),
        ("openai", 500, ChatReply.overloaded(500).body, None),
        ("openai", 400, b"not json", None),
    ],
)
def test_overflow_of_reads_each_providers_refusal_for_length(
    provider: str, status: int, body: Any, expected: Overflow | None
) -> None:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    found = overflow_of(provider, status, raw)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert (found.provider, found.limit, found.counted) == (
        expected.provider,
        expected.limit,
        expected.counted,
    )
    assert found.message
