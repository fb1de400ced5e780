"""Every failed compaction gets a failed row in the log and a sentence naming the summarizer
configuration, the host and what to do (issue 29 item 2)."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction, CompactionJob, CompactionProfile, SummarizerConfig
from sessions_app.services.background.jobs import enqueue_compaction, run_job
from sessions_app.services.compacting.failure_advice import (
    SETUP_FAILURE,
    SummarizerTarget,
    failure_advice,
)
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import Conflict
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import synthetic_history

pytestmark = pytest.mark.django_db

UNSET = "CTXWEB_SUMMARY_KEY_NEVER_SET"


@pytest.fixture(autouse=True)
def _no_fake_summarizer(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.CTXWEB_SUMMARIZER_CLASS = ""  # the configuration itself builds the summarizer
    monkeypatch.delenv(UNSET, raising=False)


def closed_port() -> int:
    with socket.socket() as closed:  # nothing listens on it once closed
        closed.bind(("127.0.0.1", 0))
        return int(closed.getsockname()[1])


def profile_with(base_url: str, key_env: str) -> CompactionProfile:
    config = SummarizerConfig.objects.create(
        name="team-openai", provider="openai", model="m", base_url=base_url, api_key_env=key_env
    )
    return CompactionProfile.objects.create(
        name="remote",
        summarizer_config=config,
        steps=["summary"],
        keep_recent_messages=4,
        max_retries=0,
        retry_backoff_seconds=0,
    )


def session_of(user: Any, profile: CompactionProfile) -> Any:
    history = synthetic_history(40, words_per_message=60)
    return create_session(user, messages=history, context_limit=3000, profile=profile)


def test_an_unset_key_fails_the_job_with_a_failed_row_and_a_plain_sentence(user: Any) -> None:
    port = closed_port()
    session = session_of(user, profile_with(f"http://127.0.0.1:{port}/v1", UNSET))
    job = enqueue_compaction(session, params={"trigger": "manual"})
    run_job(str(job.pk))
    job = CompactionJob.objects.get(pk=job.pk)
    assert job.status == "failed"
    assert "sessions_app." not in job.error  # no dotted exception path
    assert job.error.startswith(f"compaction failed: {SETUP_FAILURE}: ")
    row = Compaction.objects.get(session=session, status="failed")
    assert row.pk == job.compaction_id
    assert row.failure_reason == SETUP_FAILURE
    advice = row.details["error"]["advice"]
    assert "'team-openai'" in advice
    assert f"127.0.0.1:{port}" in advice
    assert "docs/summarizers.md#the-api-key" in advice


def test_a_connection_failure_names_the_host(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_TEST", "sk-test")
    port = closed_port()
    session = session_of(
        user, profile_with(f"http://127.0.0.1:{port}/v1", "CTXWEB_SUMMARY_KEY_TEST")
    )
    outcome = compact_session(session)
    assert outcome.failed
    assert outcome.compaction is not None
    error = outcome.compaction.details["error"]
    assert error["reason"] == "api_error"
    assert error["status"] is None
    assert f"could not connect to 127.0.0.1:{port}" in error["advice"]
    assert "'team-openai'" in error["advice"]


def test_the_log_and_the_history_show_the_sentence(user: Any) -> None:
    session = session_of(user, profile_with("https://llm.example.test/v1", UNSET))
    run_job(str(enqueue_compaction(session, params={"trigger": "manual"}).pk))
    client = Client()
    client.force_login(user)
    for tab in ("log", "history"):
        html = client.get(reverse("ui:session", args=[session.pk]) + f"?tab={tab}").content
        assert b"llm.example.test" in html, tab
        assert b"failure-advice" in html, tab


def test_the_preview_of_an_unset_key_is_a_503_without_a_traceback(
    user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    session = session_of(user, profile_with("", UNSET))
    client = Client()
    client.force_login(user)
    with caplog.at_level(logging.WARNING, logger="sessions_app"):
        response = client.post(
            reverse("ui:compact_preview", args=[session.pk]), {"profile": "remote"}
        )
    assert response.status_code == 503
    assert UNSET in response.content.decode()
    records = [r for r in caplog.records if r.name == "sessions_app"]
    assert records
    assert all(r.exc_info is None for r in records), [r.getMessage() for r in records]


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"reason": "api_error", "status": 401}, "h.test refused the API key of cfg (HTTP 401)"),
        ({"reason": "api_error", "status": 429, "retry_after": 30}, "compact again in 30 s"),
        ({"reason": "api_error", "status": 503}, "h.test failed to answer cfg (HTTP 503)"),
        ({"reason": "timeout", "status": None}, "h.test did not answer cfg in time"),
        ({"reason": "refusal", "status": None}, "The model at h.test (cfg) refused"),
        ({"reason": "archive_error", "status": None}, "the session is unchanged"),
        ({"reason": "no_savings", "status": None}, "lower the profile's summary max tokens"),
        ({"reason": "invalid_output", "status": None}, "The compaction was not applied"),
    ],
)
def test_each_failure_says_what_to_do(record: dict[str, Any], expected: str) -> None:
    assert expected in failure_advice(record, SummarizerTarget("cfg", "h.test"))


def test_a_failing_preview_says_what_to_do(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_TEST", "sk-test")
    port = closed_port()
    session = session_of(
        user, profile_with(f"http://127.0.0.1:{port}/v1", "CTXWEB_SUMMARY_KEY_TEST")
    )
    client = Client()
    client.force_login(user)
    response = client.post(reverse("ui:compact_preview", args=[session.pk]), {"profile": "remote"})
    html = response.content.decode()
    assert 'data-failure="api_error"' in html
    assert f"could not connect to 127.0.0.1:{port}" in html
    assert ".." not in html  # the sentence ends the notice's clause


def test_a_job_refused_by_a_service_says_so_plainly(user: Any) -> None:
    session = session_of(user, profile_with("", UNSET))
    job = enqueue_compaction(session, params={"trigger": "manual", "profile": "no-such-profile"})
    run_job(str(job.pk))
    job = CompactionJob.objects.get(pk=job.pk)
    assert job.status == "failed"
    assert job.error.startswith("compaction failed: refused: ")
    assert "no-such-profile" in job.error
    assert "sessions_app." not in job.error
    row = Compaction.objects.get(session=session, status="failed")
    assert (row.pk, row.failure_reason) == (job.compaction_id, "refused")
    assert "the session is unchanged" in row.details["error"]["advice"]


def test_a_conflict_on_the_last_attempt_leaves_a_failed_row(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def conflict(*args: Any, **kwargs: Any) -> Any:
        raise Conflict("another compaction committed first")

    monkeypatch.setattr("sessions_app.services.background.jobs.compact_session", conflict)
    monkeypatch.setattr(
        "sessions_app.services.background.jobs.setup_summarizer", lambda *args: None
    )
    session = session_of(user, profile_with("", UNSET))
    job = enqueue_compaction(session, params={"trigger": "manual"})
    run_job(str(job.pk))  # attempt 1: queued again, no row yet
    assert not Compaction.objects.filter(session=session, status="failed").exists()
    run_job(str(job.pk))  # attempt 2: the last
    job = CompactionJob.objects.get(pk=job.pk)
    row = Compaction.objects.get(session=session, status="failed")
    assert (job.status, row.pk, row.failure_reason) == ("failed", job.compaction_id, "conflict")
    assert "Another change to the same messages" in row.details["error"]["advice"]


def test_the_job_notice_says_it_once_with_what_to_do(user: Any) -> None:
    session = session_of(user, profile_with("https://llm.example.test/v1", UNSET))
    job = enqueue_compaction(session, params={"trigger": "manual"})
    run_job(str(job.pk))
    client = Client()
    client.force_login(user)
    html = client.get(reverse("ui:job", args=[session.pk, job.pk])).content.decode()
    assert 'data-failure="summarizer_unavailable"' in html
    assert "llm.example.test was not called" in html
    assert html.count(UNSET) == 1  # the error's message, said once
