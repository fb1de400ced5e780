"""A failed summary carries typed fields (issue 24 item 3): `SummaryError.status`,
`retry_after`, `provider` and `reason`, as one frozen `FailureCause` on the error and on the
run's `CompactResult.failure`, like httpx's `HTTPStatusError(request=, response=)`. The
error's text stays what a person reads: `HTTP 429: ...`. Real SDKs against local fakes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from compaction import (
    AnthropicSummarizer,
    FailureCause,
    OpenAISummarizer,
    Policy,
    ScriptedSummarizer,
    SummaryError,
    SummaryRequest,
    compact_messages,
)
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.fake_openai import ChatReply, FakeOpenAI

MIDDLE = [{"role": "user", "content": "fix the parser"}, {"role": "assistant", "content": "ok"}]
REQUEST = SummaryRequest(MIDDLE, max_tokens=200)


def anthropic_error(fake: FakeAnthropic) -> SummaryError:
    summarizer = AnthropicSummarizer("claude-test", api_key="test", base_url=fake.base_url)
    with pytest.raises(SummaryError) as raised:
        summarizer.summarize(REQUEST)
    return raised.value


def openai_error(fake: FakeOpenAI) -> SummaryError:
    summarizer = OpenAISummarizer("gpt-test", api_key="test", base_url=fake.base_url)
    with pytest.raises(SummaryError) as raised:
        summarizer.summarize(REQUEST)
    return raised.value


def test_an_anthropic_429_carries_status_wait_and_provider(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Reply.rate_limited(retry_after="7"))
    error = anthropic_error(fake_anthropic)
    assert (error.reason, error.status, error.retry_after, error.provider) == (
        "api_error",
        429,
        7.0,
        "anthropic",
    )
    assert error.retryable
    assert error.detail == f"HTTP 429: {error.message}"  # the text a person reads
    assert str(error) == f"api_error: HTTP 429: {error.message}"
    assert "rate limited" in error.message
    assert error.cause == FailureCause(
        "api_error",
        error.message,
        status=429,
        retry_after=7.0,
        provider="anthropic",
        error_type="SummaryError",
    )


def test_a_prompt_too_long_is_context_exceeded_with_its_status(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(Reply.prompt_too_long())
    error = anthropic_error(fake_anthropic)
    assert (error.reason, error.status, error.retryable) == ("context_exceeded", 400, False)
    assert error.message.endswith("(lower the policy's summary_input_limit to this model's window)")


def test_an_anthropic_refusal_has_no_status(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Reply.refusal())
    error = anthropic_error(fake_anthropic)
    assert (error.reason, error.status, error.retry_after) == ("refusal", None, None)


def test_an_openai_503_and_content_filter(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(ChatReply.overloaded(503), ChatReply.content_filter())
    overloaded = openai_error(fake_openai)
    assert (overloaded.reason, overloaded.status, overloaded.provider) == (
        "api_error",
        503,
        "openai",
    )
    assert overloaded.detail.startswith("HTTP 503: ")
    refused = openai_error(fake_openai)
    assert (refused.reason, refused.status) == ("refusal", None)


def test_a_connection_failure_has_no_status(unused_port: int) -> None:
    summarizer = AnthropicSummarizer(
        "claude-test", api_key="test", base_url=f"http://127.0.0.1:{unused_port}"
    )
    with pytest.raises(SummaryError) as raised:
        summarizer.summarize(REQUEST)
    error = raised.value
    assert (error.reason, error.status, error.provider) == ("api_error", None, "anthropic")
    assert error.detail.startswith("connection failed: ")


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as closed:  # nothing listens on it once closed
        closed.bind(("127.0.0.1", 0))
        port: int = closed.getsockname()[1]
    return port


def long_history(turns: int = 30) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"step {i}: " + "words " * 40})
        messages.append({"role": "assistant", "content": f"done {i}: " + "more " * 40})
    return messages


POLICY = Policy(context_limit=2000, keep_recent_messages=4, steps=("summary",), max_retries=0)


def test_the_result_names_the_failure_as_fields() -> None:
    error = SummaryError("api_error", "overloaded", status=529, retry_after=2.0)
    result = compact_messages(long_history(), POLICY, summarizer=ScriptedSummarizer(default=error))
    assert not result.compacted
    assert result.reason == "api_error"
    assert result.failure == FailureCause(
        "api_error",
        "overloaded",
        status=529,
        retry_after=2.0,
        provider="scripted",
        error_type="SummaryError",
    )
    rollback = [e for e in result.events if e.phase == "rollback"][-1]
    assert rollback.detail == {"detail": "HTTP 529: overloaded"}  # the event's text as before


def test_a_summarizer_that_raises_is_named_by_its_exception() -> None:
    class Broken:
        name = "broken"

        def summarize(self, request: SummaryRequest) -> str:
            raise ValueError("no model configured")

    result = compact_messages(long_history(), POLICY, summarizer=Broken())
    assert result.failure == FailureCause(
        "summarizer_error", "no model configured", provider="broken", error_type="ValueError"
    )
    rollback = [e for e in result.events if e.phase == "rollback"][-1]
    assert rollback.detail == {"detail": "ValueError('no model configured')"}


def test_no_rollback_no_failure() -> None:
    result = compact_messages(
        long_history(), POLICY, summarizer=ScriptedSummarizer(default="A summary.")
    )
    assert result.compacted
    assert result.failure is None


def test_the_cause_is_frozen() -> None:
    cause = FailureCause("refusal", "no")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cause.status = 500  # type: ignore[misc]
