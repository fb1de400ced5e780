"""What the API summarizers share: retry hints, HTTP errors, cut answers, reasoning."""

from __future__ import annotations

import email.utils
import time

import pytest

from compaction import Policy, ScriptedSummarizer, SummaryError, compact_messages
from compaction.summarizers.prompt import CUT_MARKER
from compaction.summarizers.sdk import (
    retry_after_seconds,
    status_error,
    strip_reasoning,
    usable_cut,
)
from compaction.summary_step import MAX_RETRY_WAIT_SECONDS
from tests.support.clock import FakeClock
from tests.support.histories import synthetic_history


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "not a date"}, None),
        ({"retry-after": "inf"}, None),
    ],
)
def test_retry_after_headers(headers, seconds):
    assert retry_after_seconds(headers) == seconds


def test_retry_after_as_an_http_date():
    moment = email.utils.formatdate(time.time() + 30, usegmt=True)

    assert 27 <= (retry_after_seconds({"Retry-After": moment}) or 0) <= 31


@pytest.mark.parametrize(
    ("status", "message", "code", "reason", "retryable"),
    [
        (400, "prompt is too long: 250000 tokens > 200000", None, "context_exceeded", False),
        (400, "bad", "context_length_exceeded", "context_exceeded", False),
        (400, "This model's maximum context length is 8192", None, "context_exceeded", False),
        (400, "the request exceeds the available context size", None, "context_exceeded", False),
        (413, "Request exceeds the maximum size", None, "context_exceeded", False),
        (400, "max_tokens: must be positive", None, "api_error", False),
        (429, "rate limited", None, "api_error", True),
        (529, "Overloaded", None, "api_error", True),
        (501, "not implemented", None, "api_error", False),
    ],
)
def test_status_errors(status, message, code, reason, retryable):
    error = status_error(status, message, {}, code=code)

    assert (error.reason, error.retryable) == (reason, retryable)
    assert str(status) in error.detail
    if reason == "context_exceeded":
        assert "summary_input_limit" in error.detail


def test_x_should_retry_overrides_the_status():
    assert not status_error(503, "busy", {"X-Should-Retry": "false"}).retryable
    assert status_error(400, "odd", {"x-should-retry": "true"}).retryable


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Goals and key decisions:\n- a\n- b cut he", "Goals and key decisions:\n- a"),
        ("Goals and key decisions:\n- a\n", "Goals and key decisions:\n- a"),
        ("Goals and key decisions:\n- a", None),  # the only content line was cut
        ("Goals and key dec", None),
        ("", None),
        ("Plain prose without headings\nand a cut li", "Plain prose without headings"),
    ],
)
def test_usable_cut(text, kept):
    assert usable_cut(text) == (f"{kept}\n{CUT_MARKER}" if kept else None)


def test_strip_reasoning():
    assert strip_reasoning("<think>a\nb</think>\nThe summary") == ("The summary", True)
    assert strip_reasoning("The summary") == ("The summary", False)
    assert strip_reasoning("<think>cut while thinking") == ("", True)


# --- the engine's retry loop --------------------------------------------------------------

HISTORY = synthetic_history(60, words_per_message=40)
POLICY = Policy(context_limit=4000, steps=("summary",), keep_recent_messages=4, min_recall=0)


def test_the_loop_waits_the_servers_time_within_the_maximum():
    summarizer = ScriptedSummarizer(
        SummaryError("api_error", "429", retry_after=MAX_RETRY_WAIT_SECONDS),
        "Goals and key decisions:\n- ok",
    )
    clock = FakeClock()

    result = compact_messages(HISTORY, POLICY, summarizer=summarizer, clock=clock, force=True)

    assert result.compacted
    assert clock.sleeps == [MAX_RETRY_WAIT_SECONDS]


def test_a_longer_server_wait_ends_the_attempts():
    summarizer = ScriptedSummarizer(
        SummaryError("api_error", "429", retry_after=MAX_RETRY_WAIT_SECONDS + 1), "never"
    )
    clock = FakeClock()

    result = compact_messages(HISTORY, POLICY, summarizer=summarizer, clock=clock, force=True)

    assert result.reason == "api_error"
    assert clock.sleeps == []
    assert summarizer.remaining == 1


def test_the_backoff_never_waits_longer_than_the_maximum():
    summarizer = ScriptedSummarizer(SummaryError("timeout"), SummaryError("timeout"), "- ok")
    clock = FakeClock()

    compact_messages(
        HISTORY,
        POLICY.replace(retry_backoff_seconds=45.0),
        summarizer=summarizer,
        clock=clock,
        force=True,
    )

    assert clock.sleeps == [45.0, MAX_RETRY_WAIT_SECONDS]
