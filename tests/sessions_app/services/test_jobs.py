"""Background compaction jobs: enqueue, the task body, events, errors, the heartbeat."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from compaction import CompactionEvent, SummaryError
from sessions_app.models import CompactionJob, Session
from sessions_app.services.background.jobs import (
    MAX_ATTEMPTS,
    Heartbeat,
    _EventRecorder,
    enqueue_compaction,
    queue_compaction,
    run_compaction_job,
    run_job,
)
from sessions_app.services.compacting import writeback
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import Conflict


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
    assert task.task_path == "sessions_app.services.background.jobs.run_compaction_job"
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

    monkeypatch.setattr(
        "sessions_app.services.compacting.session_compaction.compact_messages", explode
    )
    job = enqueue_compaction(session, params={})
    outcome = run_job(str(job.pk))
    job.refresh_from_db()
    assert outcome.status == "failed"
    assert job.status == "failed"
    assert "RuntimeError: boom" in job.error


@pytest.mark.django_db
def test_a_job_that_is_not_queued_is_skipped(session: Session) -> None:
    job = enqueue_compaction(session, params={})
    CompactionJob.objects.filter(pk=job.pk).update(status="succeeded")
    assert run_job(str(job.pk)).skipped is True


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stamps_a_running_job(session: Session) -> None:
    job = enqueue_compaction(session, params={})
    CompactionJob.objects.filter(pk=job.pk).update(status="running", heartbeat_at=None)
    with Heartbeat(job.pk, interval=0.05):
        deadline = time.monotonic() + 5
        while CompactionJob.objects.get(pk=job.pk).heartbeat_at is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)


def _conflicting(monkeypatch: Any) -> None:
    def conflict(*args: Any, **kwargs: Any) -> Any:
        raise Conflict("another compaction committed first")

    monkeypatch.setattr("sessions_app.services.background.jobs.compact_session", conflict)


@pytest.mark.django_db
def test_a_conflict_queues_the_job_again_after_the_retry_delay(
    session: Session, monkeypatch: Any, settings: Any
) -> None:
    settings.CTXWEB_JOB_RETRY_SECONDS = 30
    _conflicting(monkeypatch)
    job = enqueue_compaction(session, params={})
    first_task = job.task_id

    result = run_job(str(job.pk))

    job.refresh_from_db()
    assert result.status == "queued"
    assert result.retry == "conflict"
    assert (job.status, job.phase, job.attempts) == ("queued", "requeued", 1)
    assert job.task_id != first_task
    assert job.events[-1]["phase"] == "retry"
    assert job.events[-1]["reason"] == "conflict"
    task = DBTaskResult.objects.get(id=job.task_id)
    assert task.status == "READY"
    assert task.args_kwargs["args"] == [str(job.pk)]
    assert task.run_after is not None
    assert 20 < (task.run_after - timezone.now()).total_seconds() <= 30


@pytest.mark.django_db
def test_with_no_retry_delay_the_job_is_queued_to_run_at_once(
    session: Session, monkeypatch: Any, settings: Any
) -> None:
    settings.CTXWEB_JOB_RETRY_SECONDS = 0
    _conflicting(monkeypatch)
    job = enqueue_compaction(session, params={})
    first = DBTaskResult.objects.get(id=job.task_id)
    run_job(str(job.pk))
    job.refresh_from_db()
    again = DBTaskResult.objects.get(id=job.task_id)
    assert again.pk != first.pk
    assert again.run_after == first.run_after, "not deferred, like a fresh job"


@pytest.mark.django_db
def test_a_retryable_failure_on_the_last_attempt_fails_the_job(
    session: Session, monkeypatch: Any
) -> None:
    _conflicting(monkeypatch)
    job = enqueue_compaction(session, params={})
    run_job(str(job.pk))  # attempt 1: queued again
    job.refresh_from_db()
    task_id = job.task_id

    result = run_job(str(job.pk))  # attempt 2: the last

    job.refresh_from_db()
    assert result.status == "failed"
    assert (job.status, job.attempts, job.task_id) == ("failed", MAX_ATTEMPTS, task_id)
    assert job.error.startswith("conflict: another compaction committed first")
    assert "not retried again" in job.error
    assert [event["phase"] for event in job.events].count("retry") == 1


@pytest.mark.django_db
def test_a_job_rerun_after_a_lost_worker_is_not_retried_again(
    session: Session, monkeypatch: Any
) -> None:
    _conflicting(monkeypatch)
    job = enqueue_compaction(session, params={})
    CompactionJob.objects.filter(pk=job.pk).update(attempts=MAX_ATTEMPTS - 1)  # reaped once
    run_job(str(job.pk))
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("failed", MAX_ATTEMPTS)


@pytest.mark.django_db
def test_a_summarizer_failure_is_not_queued_again(session: Session, scripted: Any) -> None:
    scripted(default=SummaryError("api_error", retryable=True))
    job = enqueue_compaction(session, params={})
    run_job(str(job.pk))
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("failed", 1)
    assert "retry" not in [event["phase"] for event in job.events]


@pytest.mark.django_db
def test_an_automatic_job_queued_again_starts_no_cooldown(
    make_session: Any, make_profile: Any, conversation: Any, scripted: Any, monkeypatch: Any
) -> None:
    scripted(default="Goals and key decisions:\n- kept")
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    session = make_session(messages=conversation(12), context_limit=1000, profile=profile)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise DatabaseError("simulated: connection lost during commit")

    monkeypatch.setattr(writeback, "save_entry_counters", broken)
    job = enqueue_compaction(session, params={"trigger": "auto"})
    run_job(str(job.pk))
    job.refresh_from_db()
    session.refresh_from_db()
    assert job.status == "queued"
    assert job.events[-1]["reason"] == "database_error"
    assert job.events[-1]["compaction"] == 1, "the failed attempt's record"
    assert session.cooldown_until is None, "not a final outcome"
    assert session.compaction_failures == 0


@pytest.mark.django_db
def test_a_session_has_one_active_job_at_a_time(session: Session) -> None:
    first, queued = queue_compaction(session, params={"trigger": "api"})
    again, queued_again = queue_compaction(session, params={"trigger": "manual"})
    assert (queued, queued_again) == (True, False)
    assert again.pk == first.pk
    assert enqueue_compaction(session, params={}).pk == first.pk
    assert CompactionJob.objects.filter(session=session).count() == 1
    assert DBTaskResult.objects.count() == 1
    CompactionJob.objects.filter(pk=first.pk).update(status="succeeded")
    assert enqueue_compaction(session, params={}).pk != first.pk, "a finished job is not active"


@pytest.mark.django_db
def test_enqueue_locks_the_session_row_before_checking(session: Session) -> None:
    with CaptureQueriesContext(connection) as queries:
        enqueue_compaction(session, params={})
    sql = [query["sql"] for query in queries.captured_queries]
    lock = next(i for i, q in enumerate(sql) if "sessions_app_session" in q and "FROM" in q)
    check = next(i for i, q in enumerate(sql) if "sessions_app_compactionjob" in q)
    assert lock < check, "the session row is read (and locked) before the active-job check"
    if connection.features.has_select_for_update:
        assert "FOR UPDATE" in sql[lock]


@pytest.mark.django_db
def test_a_run_whose_job_was_reaped_and_requeued_does_not_overwrite_it(
    session: Session, scripted: Any, monkeypatch: Any
) -> None:
    scripted(default="Goals and key decisions:\n- done late")
    job = enqueue_compaction(session, params={})

    def reaped_meanwhile(*args: Any, **kwargs: Any) -> Any:
        # The reaper decided this (slow but alive) run was lost and queued the job again.
        CompactionJob.objects.filter(pk=job.pk).update(
            status="queued", phase="requeued", error="worker lost during attempt 1", events=[]
        )
        return compact_session(*args, **kwargs)

    monkeypatch.setattr("sessions_app.services.background.jobs.compact_session", reaped_meanwhile)
    result = run_job(str(job.pk))
    job.refresh_from_db()
    assert result.status == "lost"
    assert (job.status, job.phase, job.events) == ("queued", "requeued", [])
    assert job.error == "worker lost during attempt 1"
    assert job.finished_at is None


@pytest.mark.django_db
def test_events_of_a_run_that_lost_its_job_are_not_written(session: Session) -> None:
    job = enqueue_compaction(session, params={})
    CompactionJob.objects.filter(pk=job.pk).update(status="running", attempts=2)  # a later run
    job.attempts = 1
    recorder = _EventRecorder(job)
    recorder(CompactionEvent(phase="summary_start"))
    job.refresh_from_db()
    assert job.events == []
    assert job.phase == "queued"
    assert recorder.lost


def test_tasks_queued_under_the_old_path_still_find_the_task() -> None:
    """Task rows stored before the task moved beside its job logic name sessions_app.tasks."""
    from django.utils.module_loading import import_string

    assert import_string("sessions_app.tasks.run_compaction_job") is run_compaction_job
