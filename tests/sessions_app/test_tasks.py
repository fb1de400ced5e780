"""Background compaction jobs: enqueue, the task body, events, errors, the heartbeat."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django_tasks_db.models import DBTaskResult

from compaction import SummaryError
from sessions_app.models import CompactionJob, Session
from sessions_app.services.jobs import Heartbeat, enqueue_compaction, run_job
from sessions_app.tasks import run_compaction_job


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


@pytest.mark.django_db
def test_enqueue_creates_the_job_and_its_task(session: Session) -> None:
    job = enqueue_compaction(session, params={"instructions": "keep ids", "junk": 1})
    assert job.status == "queued"
    assert job.params == {
        "instructions": "keep ids",
        "trigger": "manual",
    }
    task = DBTaskResult.objects.get(id=job.task_id)
    assert task.status == "READY"
    assert task.task_path == "sessions_app.tasks.run_compaction_job"
    assert task.args_kwargs["args"] == [str(job.pk)]


@pytest.mark.django_db
def test_the_task_runs_the_compaction_and_records_phase_events(
    session: Session, scripted: Any
) -> None:
    scripted(default="Goals and key decisions:\n- done in the background")
    job = enqueue_compaction(session, params={"trigger": "api"})
    result = run_compaction_job.call(str(job.pk))
    job.refresh_from_db()
    assert result == {"job": str(job.pk), "status": "succeeded", "compaction": 1, "error": None}
    assert job.status == "succeeded"
    assert job.phase == "done"
    assert job.compaction is not None
    assert job.compaction.trigger == "api"
    phases = [event["phase"] for event in job.events]
    assert phases[0] == "compaction_start"
    assert "summary_done" in phases
    assert job.started_at
    assert job.finished_at
    assert job.attempts == 1


@pytest.mark.django_db
def test_a_failed_compaction_fails_the_job_with_its_reason(session: Session, scripted: Any) -> None:
    scripted(default=SummaryError("thinking_only_no_content", retryable=False))
    job = enqueue_compaction(session, params={})
    run_job(str(job.pk))
    job.refresh_from_db()
    assert job.status == "failed"
    assert "thinking_only_no_content" in job.error
    assert job.compaction is not None
    assert job.compaction.status == "failed"
    assert "rollback" in [event["phase"] for event in job.events]


@pytest.mark.django_db
def test_an_unexpected_error_fails_the_job(session: Session, monkeypatch: Any) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("sessions_app.services.compacting.compact_messages", explode)
    job = enqueue_compaction(session, params={})
    outcome = run_job(str(job.pk))
    job.refresh_from_db()
    assert outcome["status"] == "failed"
    assert job.status == "failed"
    assert "RuntimeError: boom" in job.error


@pytest.mark.django_db
def test_a_job_that_is_not_queued_is_skipped(session: Session) -> None:
    job = enqueue_compaction(session, params={})
    CompactionJob.objects.filter(pk=job.pk).update(status="succeeded")
    assert run_job(str(job.pk))["skipped"] is True


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stamps_a_running_job(session: Session) -> None:
    job = enqueue_compaction(session, params={})
    CompactionJob.objects.filter(pk=job.pk).update(status="running", heartbeat_at=None)
    with Heartbeat(job.pk, interval=0.05):
        deadline = time.monotonic() + 5
        while CompactionJob.objects.get(pk=job.pk).heartbeat_at is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
