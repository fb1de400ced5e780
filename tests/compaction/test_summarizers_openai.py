"""OpenAISummarizer with the real `openai` SDK against the local fake Chat Completions API."""

from __future__ import annotations

import time

import openai
import pytest

from compaction import OpenAISummarizer, Policy, compact_messages
from compaction.errors import SummaryError
from compaction.summarizers import SummaryRequest
from compaction.summarizers.prompt import CUT_MARKER, SYSTEM_PROMPT
from tests.support.clock import FakeClock
from tests.support.fake_openai import ChatReply, FakeOpenAI
from tests.support.histories import assistant, exchange, synthetic_history, user

MIDDLE = [
    user("Fix the failing test in tests/test_parser.py"),
    *exchange("call_1", "Read", {"file_path": "src/parser.py"}, "def parse(): ..."),
    assistant("The guard is missing; adding it."),
]


def summarizer(server: FakeOpenAI, **kwargs: object) -> OpenAISummarizer:
    options: dict[str, object] = {"api_key": "test-key", "base_url": server.base_url}
    options.update(kwargs)
    return OpenAISummarizer("gpt-test", **options)  # type: ignore[arg-type]


def test_success_returns_the_text_and_sends_a_tool_free_chat_request(fake_openai):
    fake_openai.script(ChatReply.text("Goals and key decisions:\n- fix parser"))

    text = summarizer(fake_openai).summarize(SummaryRequest(MIDDLE, max_tokens=700))

    assert text == "Goals and key decisions:\n- fix parser"
    [request] = fake_openai.requests
    assert request.path == "/v1/chat/completions"
    assert request.api_key == "test-key"
    body = request.body
    assert body["model"] == "gpt-test"
    assert body["max_tokens"] == 700  # a compatible server by base_url: the classic name
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"] == SYSTEM_PROMPT
    assert "tests/test_parser.py" in body["messages"][1]["content"]
    assert "tools" not in body
    assert "stream" not in body or body["stream"] is False


def test_the_official_endpoint_gets_max_completion_tokens():
    chosen = OpenAISummarizer("gpt-test", api_key="k")

    assert chosen._token_parameter == "max_completion_tokens"
    azure = OpenAISummarizer(
        "gpt-test", api_key="k", base_url="https://x.openai.azure.com/openai/v1"
    )
    assert azure._token_parameter == "max_completion_tokens"


def test_a_rejected_token_parameter_is_switched_once(fake_openai):
    rejected = ChatReply.error(
        400,
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        code="unsupported_parameter",
    )
    fake_openai.script(rejected, ChatReply.text("ok summary"))
    chosen = summarizer(fake_openai, max_tokens=321)

    assert chosen.summarize(SummaryRequest(MIDDLE)) == "ok summary"
    first, second = fake_openai.requests
    assert first.body["max_tokens"] == 321
    assert second.body["max_completion_tokens"] == 321
    assert "max_tokens" not in second.body
    chosen.summarize(SummaryRequest(MIDDLE))
    assert fake_openai.requests[2].body["max_completion_tokens"] == 321  # remembered


def test_key_and_base_url_come_from_the_environment(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)

    OpenAISummarizer("gpt-test").summarize(SummaryRequest(MIDDLE))

    assert fake_openai.requests[0].api_key == "env-key"


def test_a_local_server_needs_no_key(fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    text = OpenAISummarizer("llama3", base_url=fake_openai.base_url).summarize(
        SummaryRequest(MIDDLE)
    )

    assert text == "fake summary"


def test_no_credentials_at_all_is_a_clear_non_retryable_failure(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)

    with pytest.raises(SummaryError) as caught:
        OpenAISummarizer("gpt-test").summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "api_error"
    assert not caught.value.retryable
    assert "OPENAI_API_KEY" in caught.value.detail


def test_a_model_name_is_required():
    with pytest.raises(ValueError, match="model"):
        OpenAISummarizer("")


@pytest.mark.parametrize(
    ("reply", "reason", "retryable"),
    [
        (ChatReply.content_null(), "content_none", True),
        (ChatReply.no_choices(), "content_none", True),
        (ChatReply.empty_text(), "empty_summary", True),
        (ChatReply.length_no_text(), "max_tokens_no_content", True),
        (ChatReply.text("Goals and key decisions:\n- fi", finish_reason="length"), None, True),
        (ChatReply.reasoning_only(), "thinking_only_no_content", True),
        (ChatReply.reasoning_only("reasoning"), "thinking_only_no_content", True),
        (ChatReply.think_tags_only(), "thinking_only_no_content", True),
        (ChatReply.refusal(), "refusal", False),
        (ChatReply.content_filter(), "refusal", False),
        (ChatReply.content_filter("Goals and key decisions:\n- partial"), "refusal", False),
        (ChatReply.context_exceeded(), "context_exceeded", False),
    ],
)
def test_unusable_answers_have_named_reasons(fake_openai, reply, reason, retryable):
    fake_openai.script(reply)

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_openai).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == (reason or "max_tokens_no_content")
    assert caught.value.retryable is retryable


def test_a_cut_answer_keeps_its_complete_lines_and_says_it_was_cut(fake_openai):
    cut = "Goals and key decisions:\n- fix the parser\n- add a gu"
    fake_openai.script(ChatReply.text(cut, finish_reason="length"))

    text = summarizer(fake_openai).summarize(SummaryRequest(MIDDLE))

    assert text == f"Goals and key decisions:\n- fix the parser\n{CUT_MARKER}"


def test_reasoning_in_think_tags_is_not_the_summary(fake_openai):
    fake_openai.script(ChatReply.text("<think>plan it</think>\nGoals and key decisions:\n- ok"))

    assert summarizer(fake_openai).summarize(SummaryRequest(MIDDLE)) == (
        "Goals and key decisions:\n- ok"
    )


@pytest.mark.parametrize(
    ("reply", "retryable", "retry_after"),
    [
        (ChatReply.rate_limited(), True, None),
        (ChatReply.rate_limited(retry_after="7"), True, 7.0),
        (ChatReply.rate_limited(retry_after_ms="250", retry_after="9"), True, 0.25),
        (ChatReply.overloaded(503), True, None),
        (ChatReply.overloaded(500), True, None),
        (ChatReply.overloaded(503).with_headers(x_should_retry="false"), False, None),
        (ChatReply.error(400, "bad request").with_headers(x_should_retry="true"), True, None),
        (ChatReply.error(401, "bad key", kind="invalid_api_key"), False, None),
        (ChatReply.error(404, "no such model"), False, None),
    ],
)
def test_http_errors_are_api_errors_with_the_servers_retry_hints(
    fake_openai, reply, retryable, retry_after
):
    fake_openai.script(reply)

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_openai).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "api_error"
    assert caught.value.retryable is retryable
    assert caught.value.retry_after == retry_after
    assert str(reply.status) in caught.value.detail
    assert len(fake_openai.requests) == 1  # the SDK itself never retries


def test_a_hanging_server_is_a_timeout(fake_openai):
    fake_openai.script(ChatReply.hang(5))
    started = time.monotonic()

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_openai, timeout=0.3).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 3
    assert len(fake_openai.requests) == 1


def test_an_unreachable_server_is_a_retryable_api_error():
    server = FakeOpenAI().start()
    base_url = server.base_url
    server.stop()

    with pytest.raises(SummaryError) as caught:
        OpenAISummarizer("m", api_key="k", base_url=base_url, timeout=2).summarize(
            SummaryRequest(MIDDLE)
        )

    assert caught.value.reason == "api_error"
    assert caught.value.retryable


def test_a_passed_in_client_makes_one_request_per_attempt(fake_openai):
    client = openai.OpenAI(api_key="own", base_url=fake_openai.base_url)
    fake_openai.script(ChatReply.overloaded(), ChatReply.text("never asked"))

    with pytest.raises(SummaryError):
        OpenAISummarizer("gpt-test", client=client).summarize(SummaryRequest(MIDDLE))

    assert len(fake_openai.requests) == 1
    assert fake_openai.requests[0].api_key == "own"
    assert client.max_retries == openai.DEFAULT_MAX_RETRIES  # the caller's client untouched


# --- through compact_messages: the engine's loop retries, honouring the server's wait ---

POLICY = Policy(context_limit=4000, steps=("summary",), keep_recent_messages=4, min_recall=0)
HISTORY = synthetic_history(60, words_per_message=40)


def test_compact_waits_as_long_as_the_server_asks(fake_openai):
    fake_openai.script(
        ChatReply.rate_limited(retry_after_ms="250"),
        ChatReply.rate_limited(retry_after="3"),
        ChatReply.text("Goals and key decisions:\n- recovered"),
    )
    clock = FakeClock()

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_openai), clock=clock, force=True
    )

    assert result.compacted
    assert result.summarizer == "openai"
    assert clock.sleeps == [0.25, 3.0]  # the server's waits, not the backoff's 1 and 2
    retries = [e for e in result.events if e.phase == "summary_retry"]
    assert [e.detail["retry_after"] for e in retries] == [0.25, 3.0]


def test_compact_gives_up_when_the_server_asks_for_more_than_the_maximum_wait(fake_openai):
    fake_openai.script(ChatReply.rate_limited(retry_after="3600"), ChatReply.text("never"))
    clock = FakeClock()

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_openai), clock=clock, force=True
    )

    assert result.reason == "api_error"
    assert clock.sleeps == []
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [(ChatReply.content_filter(), "refusal"), (ChatReply.context_exceeded(), "context_exceeded")],
)
def test_compact_does_not_retry_a_refusal_or_an_oversized_request(fake_openai, reply, reason):
    fake_openai.script(reply, ChatReply.text("never asked"))

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_openai), clock=FakeClock(), force=True
    )

    assert not result.compacted
    assert result.reason == reason
    assert result.messages is HISTORY
    assert len(fake_openai.requests) == 1
