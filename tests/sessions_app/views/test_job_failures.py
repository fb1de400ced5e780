"""Failures a person can understand: the job's failed phase, its error, its outcome badge,
and a preview that keeps out of the job's way (templates/sessions/_actions.html)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from compaction import SummaryError
from sessions_app.models import Compaction, CompactionJob
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.threshold import shown_standing
from sessions_app.viewmodels.jobs import failed_phase, job_outcome, job_phases
from sessions_app.viewmodels.limits import Limits
from sessions_app.viewmodels.timeline import token_timeline

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

IMMEDIATE_TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture
def immediate_tasks(settings: Any) -> None:
    settings.TASKS = IMMEDIATE_TASKS


def states(job: CompactionJob) -> dict[str, str]:
    return {key: state for key, _, state in job_phases(job)}


def failed_job(session: Any, events: list[dict[str, Any]], **fields: Any) -> CompactionJob:
    return CompactionJob.objects.create(
        session=session, status=CompactionJob.Status.FAILED, phase="failed", events=events, **fields
    )


def test_a_summary_failure_marks_summarizing_not_pruning_or_committing(
    ui_session: UiSession,
) -> None:
    job = failed_job(
        ui_session.session,
        [
            {"phase": "compaction_start"},
            {"phase": "summary_start"},
            {"phase": "rollback", "reason": "api_error"},
            {"phase": "compaction_done", "reason": "api_error"},
            {"phase": "failed", "reason": "compaction failed: api_error"},
        ],
    )
    assert failed_phase(job) == "summary"
    assert states(job) == {
        "queued": "done",
        "started": "done",
        "selective": "skipped",  # the profile has no pruning step: never "failed"
        "summary": "failed",
        "commit": "todo",
        "done": "todo",
    }


def test_a_failed_pruning_step_is_the_failed_phase(ui_session: UiSession) -> None:
    job = failed_job(
        ui_session.session,
        [{"phase": "selective_start"}, {"phase": "rollback", "reason": "selective_error"}],
    )
    assert states(job)["selective"] == "failed"
    assert states(job)["summary"] == "todo"


def test_an_archive_failure_marks_committing(ui_session: UiSession) -> None:
    job = failed_job(
        ui_session.session,
        [
            {"phase": "summary_start"},
            {"phase": "summary_done"},
            {"phase": "compaction_done"},
            {"phase": "rollback", "reason": "archive_error"},
        ],
    )
    assert states(job)["summary"] == "done"
    assert states(job)["commit"] == "failed"


def test_a_failure_before_the_engine_ran_marks_started(ui_session: UiSession) -> None:
    job = failed_job(ui_session.session, [], error="ValueError: no profile")
    assert failed_phase(job) == "started"


def test_only_the_last_attempt_counts(ui_session: UiSession) -> None:
    job = failed_job(
        ui_session.session,
        [
            {"phase": "summary_start"},
            {"phase": "summary_done"},
            {"phase": "rollback", "reason": "database_error"},
            {"phase": "retry", "reason": "database_error"},
            {"phase": "summary_start"},
            {"phase": "rollback", "reason": "timeout"},
        ],
    )
    assert failed_phase(job) == "summary"


def test_a_job_that_compacted_nothing_is_not_a_green_success(ui_session: UiSession) -> None:
    job = CompactionJob.objects.create(
        session=ui_session.session,
        status=CompactionJob.Status.SUCCEEDED,
        events=[{"phase": "done", "reason": "below_threshold"}],
    )
    assert job_outcome(job) == ("empty", "nothing compacted")


def test_a_failed_job_shows_its_phase_and_underlying_error(
    ui_session: UiSession, logged_in: Client, scripted: Any, immediate_tasks: None
) -> None:
    scripted(default=SummaryError("api_error", "invalid x-api-key", retryable=False, status=401))
    session = ui_session.session
    response = logged_in.post(
        reverse("ui:compact", args=[session.pk]), {"profile": "ui-test"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    failed = Compaction.objects.get(session=session, status="failed")
    assert failed.details["error"]["status"] == 401
    assert 'data-job-status="failed"' in html
    assert 'class="badge status status-failed"' in html
    assert "status-succeeded" not in html
    assert 'class="phase phase-failed" data-phase="summary"' in html
    assert 'class="phase phase-failed" data-phase="commit"' not in html
    assert "HTTP 401" in html
    assert "invalid x-api-key" in html
    assert "compaction failed: api_error" not in html  # the failure notice says it, and more
    assert f'href="?tab=log#log-{failed.number}"' in html
    # The compaction log shows the error, and its row is the link's anchor.
    log = logged_in.get(reverse("ui:tab", args=[session.pk, "log"]), HTTP_HX_REQUEST="true")
    text = log.content.decode()
    assert f'id="log-{failed.number}"' in text
    assert "HTTP 401" in text
    assert "invalid x-api-key" in text


def test_a_finished_jobs_link_lands_on_its_marker(
    ui_session: UiSession, logged_in: Client, scripted: Any, immediate_tasks: None
) -> None:
    scripted(default="Summary: the CLI uses the new parser.")
    session = ui_session.session
    html = logged_in.post(
        reverse("ui:compact", args=[session.pk]), {"profile": "ui-test"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    newest = Compaction.objects.filter(session=session).order_by("-number").first()
    assert newest is not None
    assert f'href="?tab=history#compaction-{newest.number}"' in html
    page = logged_in.get(reverse("ui:session", args=[session.pk]) + "?tab=history")
    assert f'id="compaction-{newest.number}"' in page.content.decode()


def test_a_preview_that_would_fail_is_an_error_not_info(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=RuntimeError("no key"))  # the engine's summarizer_error
    response = logged_in.post(
        reverse("ui:compact_preview", args=[ui_session.session.pk]),
        {"profile": "ui-test"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert "notice-info" not in html
    assert 'class="notice notice-error"' in html
    assert "summarizer_error" in html
    assert "RuntimeError" in html
    assert "no key" in html


def test_preview_and_job_answer_into_separate_places(
    ui_session: UiSession, logged_in: Client, immediate_tasks: None, scripted: Any
) -> None:
    scripted(default="A summary.")
    session = ui_session.session
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert 'hx-target="#compact-preview-output"' in page
    assert 'id="compact-button"' in page
    button = page[page.index('id="compact-button"') :]
    assert button[: button.index(">")].endswith('hx-target="#compact-job-output"')
    assert 'id="compact-job-output"' in page
    assert 'id="compact-preview-output"' in page
    # Starting a job empties the now stale preview out of band; polling never does.
    started = logged_in.post(reverse("ui:compact", args=[session.pk]), {}, HTTP_HX_REQUEST="true")
    assert 'id="compact-preview-output" aria-live="polite" hx-swap-oob="true"' in (
        started.content.decode()
    )
    job = CompactionJob.objects.get(session=session)
    polled = logged_in.get(reverse("ui:job", args=[session.pk, job.pk]), HTTP_HX_REQUEST="true")
    assert b"hx-swap-oob" not in polled.content


def test_a_failed_attempt_is_a_red_marker_on_the_timeline(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    session = ui_session.session
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert "drop-failed" not in page  # drawn (and cached) before the failure
    scripted(default=SummaryError("timeout", "no answer within 30 s", retryable=False))
    outcome = compact_session(session, profile="ui-test")
    assert outcome.compaction is not None
    number = outcome.compaction.number
    session.refresh_from_db()
    chart = token_timeline(session, Limits.of(shown_standing(session)))
    marker = next(m for m in chart.markers if m.number == number)
    assert marker.failed
    assert not marker.reverted
    assert marker.y_before == marker.y_after  # the runtime line does not fall
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert f'class="drop drop-failed" data-drop="{number}"' in page
    assert f'href="?tab=log#log-{number}"' in page
    assert "failed: timeout" in page


def test_the_jobs_error_line_is_kept_when_it_says_more(
    ui_session: UiSession, logged_in: Client
) -> None:
    session = ui_session.session
    job = failed_job(session, [], error="compaction failed: conflict (attempt 2 of 2)")
    url = reverse("ui:job", args=[session.pk, job.pk])
    assert b"attempt 2 of 2" in logged_in.get(url, HTTP_HX_REQUEST="true").content
