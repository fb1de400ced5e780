"""AnthropicSummarizer with the real SDK against the local fake Messages API."""

from __future__ import annotations

import time

import anthropic
import pytest

from compaction import Policy, compact_messages
from compaction.errors import SummaryError
from compaction.summarizers import AnthropicSummarizer, SummaryRequest
from compaction.summarizers.prompt import SYSTEM_PROMPT
from tests.support.clock import FakeClock
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.histories import assistant, exchange, synthetic_history, user

MIDDLE = [
    user("Fix the failing test in tests/test_parser.py"),
    *exchange("toolu_1", "Read", {"file_path": "src/parser.py"}, "def parse(): ..."),
    assistant("The guard is missing; adding it."),
]


def summarizer(server: FakeAnthropic, **kwargs: object) -> AnthropicSummarizer:
    options: dict[str, object] = {"api_key": "test-key", "base_url": server.base_url}
    options.update(kwargs)
    return AnthropicSummarizer("claude-test", **options)  # type: ignore[arg-type]


def test_success_returns_the_text_and_sends_a_tool_free_request(fake_anthropic):
    fake_anthropic.script(Reply.text("Goals and key decisions:\n- fix parser"))

    text = summarizer(fake_anthropic).summarize(SummaryRequest(MIDDLE, max_tokens=700))

    assert text == "Goals and key decisions:\n- fix parser"
    [request] = fake_anthropic.requests
    assert request.path == "/v1/messages"
    assert request.api_key == "test-key"
    assert request.body["model"] == "claude-test"
    assert request.body["max_tokens"] == 700
    assert request.body["system"] == SYSTEM_PROMPT
    assert "tools" not in request.body
    assert "tests/test_parser.py" in request.prompt
    assert '{"file_path":"src/parser.py"}' in request.prompt


def test_max_tokens_argument_overrides_the_request_cap(fake_anthropic):
    summarizer(fake_anthropic, max_tokens=123).summarize(SummaryRequest(MIDDLE, max_tokens=900))

    assert fake_anthropic.requests[0].body["max_tokens"] == 123


def test_key_and_base_url_come_from_the_environment(fake_anthropic, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)

    AnthropicSummarizer("claude-test").summarize(SummaryRequest(MIDDLE))

    assert fake_anthropic.requests[0].api_key == "env-key"


def test_a_model_name_is_required():
    with pytest.raises(ValueError, match="model"):
        AnthropicSummarizer("")


def test_default_timeout_is_thirty_seconds(fake_anthropic):
    assert summarizer(fake_anthropic).timeout == 30.0


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply.content_null(), "content_none"),
        (Reply.blocks([]), "content_none"),
        (Reply.empty_text(), "empty_summary"),
        (Reply.max_tokens_no_text(), "max_tokens_no_content"),
        (
            Reply.blocks(
                [{"type": "thinking", "thinking": "hm", "signature": "s"}], stop_reason="max_tokens"
            ),
            "max_tokens_no_content",
        ),
        (Reply.thinking_only(), "thinking_only_no_content"),
    ],
)
def test_unusable_answers_have_named_reasons(fake_anthropic, reply, reason):
    fake_anthropic.script(reply)

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_anthropic).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == reason
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("reply", "retryable"),
    [
        (Reply.rate_limited(), True),
        (Reply.server_error(), True),
        (Reply.overloaded(), True),
        (Reply.error(400, "invalid_request_error"), False),
        (Reply.error(401, "authentication_error"), False),
        (Reply.error(403, "permission_error"), False),
        (Reply.error(404, "not_found_error"), False),
    ],
)
def test_http_errors_are_api_errors(fake_anthropic, reply, retryable):
    fake_anthropic.script(reply)

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_anthropic).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "api_error"
    assert caught.value.retryable is retryable
    assert str(reply.status) in caught.value.detail
    assert len(fake_anthropic.requests) == 1  # the SDK itself never retries


def test_a_hanging_server_is_a_timeout(fake_anthropic):
    fake_anthropic.script(Reply.hang(5))
    started = time.monotonic()

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_anthropic, timeout=0.3).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 3
    assert len(fake_anthropic.requests) == 1


def test_an_unreachable_server_is_an_api_error():
    server = FakeAnthropic().start()
    base_url = server.base_url
    server.stop()
    broken = AnthropicSummarizer("m", api_key="k", base_url=base_url, timeout=2)

    with pytest.raises(SummaryError) as caught:
        broken.summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "api_error"
    assert caught.value.retryable


def test_a_ready_client_can_be_passed_in(fake_anthropic):
    client = anthropic.Anthropic(api_key="own", base_url=fake_anthropic.base_url, max_retries=0)

    AnthropicSummarizer("claude-test", client=client).summarize(SummaryRequest(MIDDLE))

    assert fake_anthropic.requests[0].api_key == "own"


def test_a_passed_in_client_makes_one_request_per_attempt(fake_anthropic):
    # The caller's client keeps the SDK's default retries (2): they must not run inside
    # one attempt, or compact_messages would count 1 attempt for 3 requests.
    client = anthropic.Anthropic(api_key="own", base_url=fake_anthropic.base_url)
    fake_anthropic.script(Reply.overloaded(), Reply.text("never asked"))

    with pytest.raises(SummaryError) as caught:
        AnthropicSummarizer("claude-test", client=client).summarize(SummaryRequest(MIDDLE))

    assert caught.value.reason == "api_error"
    assert len(fake_anthropic.requests) == 1
    assert client.max_retries == anthropic.DEFAULT_MAX_RETRIES  # the caller's client is untouched


def test_a_passed_in_client_is_retried_by_compact_messages_only(fake_anthropic):
    client = anthropic.Anthropic(api_key="own", base_url=fake_anthropic.base_url)
    fake_anthropic.script(Reply.overloaded(), Reply.text("Goals and key decisions:\n- ok"))
    clock = FakeClock()

    result = compact_messages(
        HISTORY,
        POLICY.replace(max_retries=1),
        summarizer=AnthropicSummarizer("claude-test", client=client),
        clock=clock,
        force=True,
    )

    assert result.compacted
    assert len(fake_anthropic.requests) == 2  # one per attempt
    assert clock.sleeps == [1.0]


# --- through compact_messages: retries are counted there --------------------------------

# min_recall 0: no retention re-ask, so every request below is a retry.
POLICY = Policy(context_limit=4000, steps=("summary",), keep_recent_messages=4, min_recall=0)
HISTORY = synthetic_history(60, words_per_message=40)


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Reply.rate_limited(), "api_error"),
        (Reply.server_error(), "api_error"),
        (Reply.overloaded(), "api_error"),
        (Reply.empty_text(), "empty_summary"),
        (Reply.max_tokens_no_text(), "max_tokens_no_content"),
        (Reply.thinking_only(), "thinking_only_no_content"),
        (Reply.content_null(), "content_none"),
    ],
)
def test_compact_retries_then_succeeds(fake_anthropic, failure, reason):
    fake_anthropic.script(failure, failure, Reply.text("Goals and key decisions:\n- recovered"))
    clock = FakeClock()

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_anthropic), clock=clock, force=True
    )

    assert result.compacted
    assert "recovered" in (result.summary or "")
    assert len(fake_anthropic.requests) == 3  # 1 + max_retries (2)
    assert clock.sleeps == [1.0, 2.0]  # backoff: retry_backoff_seconds * 2**attempt
    retries = [e for e in result.events if e.phase == "summary_retry"]
    assert [(e.attempt, e.reason) for e in retries] == [(1, reason), (2, reason)]


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Reply.overloaded(), "api_error"),
        (Reply.empty_text(), "empty_summary"),
        (Reply.content_null(), "content_none"),
    ],
)
def test_compact_gives_up_after_max_retries_and_rolls_back(fake_anthropic, failure, reason):
    fake_anthropic.script(failure, failure, failure, Reply.text("never asked"))

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_anthropic), clock=FakeClock(), force=True
    )

    assert not result.compacted
    assert result.reason == reason
    assert result.messages is HISTORY
    assert len(fake_anthropic.requests) == 3
    assert fake_anthropic.remaining == 1


def test_compact_with_retries_disabled_asks_once(fake_anthropic):
    fake_anthropic.script(Reply.rate_limited(), Reply.text("never asked"))
    clock = FakeClock()

    result = compact_messages(
        HISTORY,
        POLICY.replace(max_retries=0),
        summarizer=summarizer(fake_anthropic),
        clock=clock,
        force=True,
    )

    assert result.reason == "api_error"
    assert len(fake_anthropic.requests) == 1
    assert clock.sleeps == []


def test_compact_does_not_retry_a_client_error(fake_anthropic):
    fake_anthropic.script(Reply.error(401, "authentication_error"), Reply.text("never asked"))

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_anthropic), clock=FakeClock(), force=True
    )

    assert result.reason == "api_error"
    assert len(fake_anthropic.requests) == 1


def test_compact_counts_timeouts_as_attempts(fake_anthropic):
    fake_anthropic.script(Reply.hang(5), Reply.text("Goals and key decisions:\n- after timeout"))

    result = compact_messages(
        HISTORY,
        POLICY,
        summarizer=summarizer(fake_anthropic, timeout=0.3),
        clock=FakeClock(),
        force=True,
    )

    assert result.compacted
    assert [e.reason for e in result.events if e.phase == "summary_retry"] == ["timeout"]
    assert len(fake_anthropic.requests) == 2


# --- stop reasons, context-window errors and the server's retry hints -------------------


@pytest.mark.parametrize(
    ("reply", "reason", "retryable"),
    [
        (Reply.refusal(), "refusal", False),
        (Reply.refusal("Goals and key decisions:\n- half a summary"), "refusal", False),
        (Reply.prompt_too_long(), "context_exceeded", False),
        (Reply.error(413, "request_too_large", "Request exceeds the maximum size"), None, False),
        (Reply.blocks([], stop_reason="model_context_window_exceeded"), "context_exceeded", False),
        (Reply.text("Goals and key decisions:\n- fi", stop_reason="max_tokens"), None, True),
    ],
)
def test_refusals_and_oversized_requests_are_never_a_summary(
    fake_anthropic, reply, reason, retryable
):
    fake_anthropic.script(reply)

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_anthropic).summarize(SummaryRequest(MIDDLE))

    expected = reason or ("context_exceeded" if reply.status == 413 else "max_tokens_no_content")
    assert caught.value.reason == expected
    assert caught.value.retryable is retryable


@pytest.mark.parametrize("stop_reason", ["max_tokens", "model_context_window_exceeded"])
def test_a_cut_answer_keeps_its_complete_lines(fake_anthropic, stop_reason):
    cut = "Goals and key decisions:\n- fix the parser\n\nFile operations:\n- src/pa"
    fake_anthropic.script(Reply.text(cut, stop_reason=stop_reason))

    text = summarizer(fake_anthropic).summarize(SummaryRequest(MIDDLE))

    assert text == (
        "Goals and key decisions:\n- fix the parser\n\nFile operations:\n"
        "[summary cut at its token limit]"
    )


@pytest.mark.parametrize(
    ("reply", "retryable", "retry_after"),
    [
        (Reply.rate_limited(retry_after="7"), True, 7.0),
        (Reply.rate_limited(retry_after_ms="1500"), True, 1.5),
        (Reply.rate_limited(retry_after="soon"), True, None),
        (Reply.overloaded().with_headers(x_should_retry="false"), False, None),
        (Reply.error(400, "invalid_request_error").with_headers(x_should_retry="true"), True, None),
    ],
)
def test_the_servers_retry_hints_are_read(fake_anthropic, reply, retryable, retry_after):
    fake_anthropic.script(reply)

    with pytest.raises(SummaryError) as caught:
        summarizer(fake_anthropic).summarize(SummaryRequest(MIDDLE))

    assert caught.value.retryable is retryable
    assert caught.value.retry_after == retry_after
    assert len(fake_anthropic.requests) == 1


def test_compact_waits_as_the_server_asks_then_backs_off(fake_anthropic):
    fake_anthropic.script(
        Reply.rate_limited(retry_after="4"),
        Reply.overloaded(),
        Reply.text("Goals and key decisions:\n- recovered"),
    )
    clock = FakeClock()

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_anthropic), clock=clock, force=True
    )

    assert result.compacted
    assert clock.sleeps == [4.0, 2.0]  # Retry-After, then the backoff of attempt 2
    assert len(fake_anthropic.requests) == 3


def test_compact_names_a_refusal_and_does_not_retry_it(fake_anthropic):
    fake_anthropic.script(Reply.refusal(), Reply.text("never asked"))

    result = compact_messages(
        HISTORY, POLICY, summarizer=summarizer(fake_anthropic), clock=FakeClock(), force=True
    )

    assert result.reason == "refusal"
    assert result.messages is HISTORY
    assert len(fake_anthropic.requests) == 1
