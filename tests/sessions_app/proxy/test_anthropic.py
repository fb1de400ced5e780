"""The Anthropic SDK through the proxy: answers unchanged, conversations stored."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from sessions_app.models import Message, Session
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)


def test_answer_passes_through_and_is_stored(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(Reply.text("Paris."))
    reply = claude.messages.create(
        model="claude-test",
        max_tokens=100,
        system="You are terse.",
        messages=[{"role": "user", "content": "Capital of France?"}],
    )
    assert reply.content[0].text == "Paris."  # type: ignore[union-attr]
    sent = upstream_anthropic.requests[0]
    assert sent.api_key == "sk-ant-server-key"
    assert sent.body["system"] == "You are terse."
    assert sent.body["messages"] == [{"role": "user", "content": "Capital of France?"}]
    session = Session.objects.get()
    assert session.title == "Capital of France?"
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].content == [{"type": "text", "text": "Paris."}]
    assert stored[1].extra["usage"]["output_tokens"] == 5


def test_streaming_answer_passes_through_and_is_stored(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(Reply.text("A long streamed answer, in pieces."))
    with claude.messages.stream(
        model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "Stream?"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "A long streamed answer, in pieces."
    assert final.usage.output_tokens == 5
    assert upstream_anthropic.requests[0].body["stream"] is True
    answer = Message.objects.get(role="assistant")
    assert answer.content == [{"type": "text", "text": "A long streamed answer, in pieces."}]
    assert answer.extra["usage"]["output_tokens"] == 5


def _tool_call() -> Reply:
    return Reply.blocks(
        [
            {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        ],
        stop_reason="tool_use",
    )


@pytest.mark.parametrize("stream", [False, True])
def test_same_conversation_maps_to_one_session(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic, stream: bool
) -> None:
    upstream_anthropic.script(_tool_call(), Reply.text("Cold."), Reply.text("You're welcome."))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    for follow_up in (
        lambda r: {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "-5C"}],
        },
        lambda r: {"role": "user", "content": "Thanks!"},
        None,
    ):
        reply: Any
        if stream:
            with claude.messages.stream(model="m", max_tokens=50, messages=history) as s:  # type: ignore[arg-type]
                reply = s.get_final_message()
        else:
            reply = claude.messages.create(model="m", max_tokens=50, messages=history)  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": reply.content})
        if follow_up is not None:
            history.append(follow_up(reply))
    session = Session.objects.get()
    roles = list(Message.objects.filter(session=session).order_by("seq").values_list("role"))
    assert [r for (r,) in roles] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    thinking = Message.objects.get(session=session, seq=1).content[0]
    assert thinking == {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"}


def test_edited_history_starts_a_new_session(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    first = [{"role": "user", "content": "Hello"}]
    reply = claude.messages.create(model="m", max_tokens=50, messages=first)  # type: ignore[arg-type]
    edited: Any = [
        *first,
        {"role": "assistant", "content": "something else entirely"},
        {"role": "user", "content": "Go on"},
    ]
    claude.messages.create(model="m", max_tokens=50, messages=edited)
    assert Session.objects.count() == 2
    original = Session.objects.order_by("created_at").first()
    assert original is not None
    assert original.message_count == 2
    assert reply.content


def test_named_session_header(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    headers = {"X-Ctxweb-Session": "my-run"}
    for text in ("one", "two"):
        claude.messages.create(
            model="m",
            max_tokens=50,
            messages=[{"role": "user", "content": f"different start {text}"}],
            extra_headers=headers,
        )
    sessions = list(Session.objects.all())
    assert {s.external_id for s in sessions} == {"my-run"}
    session = Session.objects.order_by("created_at").first()
    assert session is not None
    continued: Any = [
        {"role": "user", "content": "different start one"},
        {"role": "assistant", "content": [{"type": "text", "text": "fake summary"}]},
        {"role": "user", "content": "by id"},
    ]
    claude.messages.create(
        model="m",
        max_tokens=50,
        messages=continued,
        extra_headers={"X-Ctxweb-Session": str(session.pk)},
    )
    session.refresh_from_db()
    assert session.message_count == 4
    assert Session.objects.count() == 2


def test_count_tokens_is_forwarded(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    counted = claude.messages.count_tokens(
        model="m", messages=[{"role": "user", "content": "How many?"}]
    )
    assert counted.input_tokens > 0
    assert upstream_anthropic.requests[0].path == "/v1/messages/count_tokens"
    assert not Session.objects.exists()


def test_observe_mode_forwards_unchanged(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    claude.messages.create(
        model="m",
        max_tokens=50,
        messages=[{"role": "user", "content": "watch me"}],
        extra_headers={"X-Ctxweb-Mode": "observe"},
    )
    assert Message.objects.count() == 2


def test_unknown_mode_and_bad_key_are_refused(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic, proxy_server: Any
) -> None:
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Ctxweb-Mode": "sometimes"},
        )
    stranger = anthropic.Anthropic(
        api_key="ctx_000000000000_nope", base_url=f"{proxy_server.url}/proxy/anthropic"
    )
    with pytest.raises(anthropic.AuthenticationError):
        stranger.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert upstream_anthropic.requests == []
