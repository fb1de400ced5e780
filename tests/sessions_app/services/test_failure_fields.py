"""A failed summary reaches the app as typed fields, not as text (issue 24 item 3).

The engine's failure carries its status, Retry-After, provider and reason
(`compaction.FailureCause`, `CompactResult.failure`); services/compacting/failure_errors.py reads
those
fields and never parses an engine message. Real SDKs against the local fake servers
(tests/support/): the rows, job and API answers are what they were when the status was
parsed out of "HTTP 429: ..." text.
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from compaction import FailureCause, SummaryError
from sessions_app.models import Compaction, CompactionJob, Session
from sessions_app.services.background import jobs
from sessions_app.services.compacting.failure_errors import failure_error
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import Unavailable, engine_error
from tests.support.fake_anthropic import FakeAnthropic, Reply

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

#: The SDK's message of an error answer (anthropic.APIStatusError.message).
API_ERROR = "Error code: {} - {{'type': 'error', 'error': {{'type': '{}', 'message': '{}'}}}}"
FAILURE_ERRORS = (
    Path(__file__).parents[3] / "sessions_app" / "services" / "compacting" / "failure_errors.py"
)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def anthropic_session(
    settings: Any,
    make_session: Any,
    make_profile: Any,
    conversation: Any,
    base_url: str,
    **policy: Any,
) -> Session:
    """A session whose profile summarizes with AnthropicSummarizer at `base_url`."""
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = base_url
    profile = make_profile(
        summarizer="auto",
        summary_model="claude-test",
        keep_recent_messages=4,
        steps=["summary"],
        **policy,
    )
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def failed_error(session: Session) -> dict[str, Any]:
    outcome = compact_session(session)
    assert outcome.failed
    assert outcome.compaction is not None
    error: dict[str, Any] = dict(outcome.compaction.details["error"])
    # The sentence for people (services/compacting/failure_advice.py) has its own tests.
    assert isinstance(error.pop("advice"), str)
    return error


def _regex_patterns(path: Path) -> list[str]:
    """The string patterns given to `re` functions in `path`."""
    patterns = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            patterns.append(str(node.args[0].value))
    return patterns


def test_failure_errors_reads_no_engine_message_with_a_regex() -> None:
    tree = ast.parse(FAILURE_ERRORS.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {"re", "regex"} & imported
    assert not {"re", "regex"} & modules


def test_no_regex_in_the_app_reads_an_http_status_out_of_a_message() -> None:
    app = FAILURE_ERRORS.parents[1]
    found = {
        str(path.relative_to(app)): pattern
        for path in app.rglob("*.py")
        for pattern in _regex_patterns(path)
        if "HTTP" in pattern
    }
    assert found == {}


def test_a_429_with_retry_after_keeps_status_wait_and_attempts(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any, fake: FakeAnthropic
) -> None:
    limited = Reply.rate_limited(retry_after="1")
    fake.script(limited, limited)
    session = anthropic_session(
        settings, make_session, make_profile, conversation, fake.base_url, max_retries=1
    )
    assert failed_error(session) == {
        "type": "SummaryError",
        "message": API_ERROR.format(429, "rate_limit_error", "rate limited"),
        "status": 429,
        "reason": "api_error",
        "attempts": 2,
        "retry_after": 1.0,
    }


def test_a_503_keeps_its_status_and_the_servers_message(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any, fake: FakeAnthropic
) -> None:
    fake.script(Reply.error(503, "api_error", "the model is overloaded"))
    session = anthropic_session(
        settings, make_session, make_profile, conversation, fake.base_url, max_retries=0
    )
    assert failed_error(session) == {
        "type": "SummaryError",
        "message": API_ERROR.format(503, "api_error", "the model is overloaded"),
        "status": 503,
        "reason": "api_error",
    }


def test_a_connection_failure_has_no_status(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any
) -> None:
    with socket.socket() as closed:  # a port nothing listens on once closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    session = anthropic_session(
        settings,
        make_session,
        make_profile,
        conversation,
        f"http://127.0.0.1:{port}",
        max_retries=0,
    )
    error = failed_error(session)
    assert (error["type"], error["status"], error["reason"]) == ("SummaryError", None, "api_error")
    assert error["message"].startswith("connection failed: ")


def test_a_refusal_is_its_reason_without_a_status(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any, fake: FakeAnthropic
) -> None:
    fake.script(Reply.refusal())
    session = anthropic_session(
        settings, make_session, make_profile, conversation, fake.base_url, max_retries=0
    )
    assert failed_error(session) == {
        "type": "SummaryError",
        "message": "the model refused to summarize",
        "status": None,
        "reason": "refusal",
    }


def test_a_background_job_row_names_the_failure(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any, fake: FakeAnthropic
) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    fake.script(Reply.error(503, "api_error", "the model is overloaded"))
    session = anthropic_session(
        settings, make_session, make_profile, conversation, fake.base_url, max_retries=0
    )
    job, queued = jobs.queue_compaction(session, params={"trigger": "manual"})
    job.refresh_from_db()
    assert queued
    assert (job.status, job.error) == (CompactionJob.Status.FAILED, "compaction failed: api_error")
    failed = Compaction.objects.get(session=session, status="failed")
    assert failed.pk == job.compaction_id
    assert failed.details["error"]["status"] == 503


def test_the_api_answers_a_failed_summary_as_today(
    settings: Any,
    make_session: Any,
    make_profile: Any,
    conversation: Any,
    fake: FakeAnthropic,
    api_client: Any,
) -> None:
    fake.script(Reply.rate_limited(retry_after="7"))
    session = anthropic_session(
        settings, make_session, make_profile, conversation, fake.base_url, max_retries=0
    )
    response = api_client.post(f"/api/sessions/{session.pk}/compactions", {})
    assert response.status_code == 200
    body = response.json()
    assert (body["compacted"], body["status"]) == (False, "failed")
    assert body["compaction"]["failure_reason"] == "api_error"


def test_a_summary_error_from_the_model_is_a_503_with_its_wait() -> None:
    error = engine_error(SummaryError("api_error", "rate limited", status=429, retry_after=7.2))
    assert isinstance(error, Unavailable)
    assert error.retry_after == 8
    assert str(error) == "summary model unavailable: api_error: HTTP 429: rate limited"


def test_the_record_reads_the_typed_fields() -> None:
    cause = FailureCause("api_error", "overloaded", status=529, retry_after=3.0, provider="x")
    assert failure_error("api_error", {}, cause=cause) == {
        "type": "SummaryError",
        "message": "overloaded",
        "status": 529,
        "reason": "api_error",
    }
    raised = FailureCause("summarizer_error", "boom", error_type="RuntimeError")
    assert failure_error("summarizer_error", {}, cause=raised)["type"] == "RuntimeError"


def test_a_preview_names_the_status_of_the_failure(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=SummaryError("api_error", "the model is overloaded", status=503))
    response = logged_in.post(
        reverse("ui:compact_preview", args=[ui_session.session.pk]),
        {"profile": "ui-test"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert 'class="notice notice-error"' in html
    assert "HTTP 503 · <span" in html
    assert "the model is overloaded" in html
    assert "HTTP 503: the model" not in html  # the status is a field, not part of the message
