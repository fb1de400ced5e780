"""A failed compaction records its underlying error (services/compacting/failure_errors.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.storage import FileSystemStorage

from compaction import FailureCause, ScriptedSummarizer, SummaryError
from sessions_app.models import Session
from sessions_app.services.compacting.failure_errors import failure_error
from sessions_app.services.compacting.session_compaction import compact_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def rollback(detail: str) -> dict[str, Any]:
    return {"events": [{"phase": "rollback", "reason": "api_error", "detail": {"detail": detail}}]}


def test_an_http_error_answer_gives_its_status_and_message() -> None:
    cause = SummaryError("api_error", "rate limited, slow down", status=429).cause
    error = failure_error("api_error", rollback("HTTP 429: rate limited, slow down"), cause=cause)
    assert error == {
        "type": "SummaryError",
        "message": "rate limited, slow down",
        "status": 429,
        "reason": "api_error",
    }


def test_a_raised_exception_gives_its_type_and_message() -> None:
    cause = FailureCause.raised("summarizer_error", RuntimeError("boom"))
    error = failure_error("summarizer_error", rollback("RuntimeError('boom')"), cause=cause)
    assert error["type"] == "RuntimeError"
    assert error["message"] == "boom"
    assert error["status"] is None


def test_retries_and_the_servers_wait_are_counted() -> None:
    details = rollback("HTTP 503: overloaded")
    details["events"][:0] = [
        {"phase": "summary_retry", "detail": {"delay": 1.0, "retry_after": 7}},
        {"phase": "summary_retry", "detail": {"delay": 2.0}},
    ]
    cause = FailureCause("api_error", "overloaded", status=503)
    error = failure_error("api_error", details, cause=cause)
    assert (error["status"], error["attempts"], error["retry_after"]) == (503, 3, 7.0)


def test_without_events_the_reason_is_the_message() -> None:
    assert failure_error("time_budget", {}) == {
        "type": None,
        "message": "time_budget",
        "status": None,
        "reason": "time_budget",
    }


def test_a_failed_summary_stores_the_http_status_on_the_row(session: Session) -> None:
    failing = ScriptedSummarizer(
        default=SummaryError("api_error", "invalid api key", retryable=False, status=401)
    )
    outcome = compact_session(session, summarizer=failing)
    assert outcome.compaction is not None
    error = outcome.compaction.details["error"]
    assert error["status"] == 401
    assert error["message"] == "invalid api key"
    assert error["reason"] == "api_error"


def test_a_summarizer_that_raises_stores_the_exception_type(session: Session) -> None:
    class Broken:
        name = "broken"

        def summarize(self, request: Any) -> str:
            raise ValueError("no model configured")

    outcome = compact_session(session, summarizer=Broken())
    assert outcome.compaction is not None
    error = outcome.compaction.details["error"]
    assert (error["type"], error["message"]) == ("ValueError", "no model configured")
    assert outcome.compaction.failure_reason == "summarizer_error"


def test_an_archive_failure_stores_the_exception(session: Session, monkeypatch: Any) -> None:
    def broken_save(*args: Any, **kwargs: Any) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(FileSystemStorage, "save", broken_save)
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default="A summary."))
    assert outcome.compaction is not None
    error = outcome.compaction.details["error"]
    assert error["reason"] == "archive_error"
    assert "disk full" in error["message"]
    assert error["type"]
