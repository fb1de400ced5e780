"""At most one queued-or-running compaction job per session, on SQLite and PostgreSQL alike.

On PostgreSQL the session row lock serializes concurrent "Compact now" requests; SQLite takes
no row lock (ctxweb's IMMEDIATE transactions serialize them there). Whatever the locking, the
database constraint `one_active_job_per_session` holds the line: these tests take the
serializing away and check that it does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from sessions_app.models import CompactionJob, Session
from sessions_app.services.background import jobs
from sessions_app.services.background.jobs import queue_compaction

pytestmark = pytest.mark.django_db(transaction=True)

ActiveJob = Callable[[Session], CompactionJob | None]


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(6), context_limit=3000, profile=profile)
    return made


def test_a_request_whose_check_missed_the_active_job_gets_that_job(
    session: Session, monkeypatch: Any
) -> None:
    """A second request that looked before the first one committed (nothing serialized them)."""
    first, queued_now = queue_compaction(session, params={})
    assert queued_now
    monkeypatch.setattr(jobs, "active_job", _first_calls(1, lambda of: None, jobs.active_job))

    job, queued_now = queue_compaction(Session.objects.get(pk=session.pk), params={})

    assert (job.pk, queued_now) == (first.pk, False)
    assert list(CompactionJob.objects.filter(session=session).values_list("pk", flat=True)) == [
        first.pk
    ]


def test_a_finished_job_does_not_stop_the_next_one(session: Session) -> None:
    first, _ = queue_compaction(session, params={})
    CompactionJob.objects.filter(pk=first.pk).update(status="succeeded")
    second, queued_now = queue_compaction(session, params={})
    assert queued_now
    assert second.pk != first.pk
    CompactionJob.objects.filter(pk=second.pk).update(status="failed")
    assert queue_compaction(session, params={})[1]


@pytest.mark.postgres
def test_two_concurrent_requests_without_the_row_lock_queue_one_job(
    session: Session, monkeypatch: Any
) -> None:
    """Two threads both find no active job, then both queue: one job, both get it."""
    if connection.vendor == "sqlite":
        pytest.skip(
            "the SQLite test database is in memory (shared cache): a second writer gets "
            "'database table is locked' at once instead of waiting"
        )
    # Take the row lock away and let both requests check before either queues.
    monkeypatch.setattr(jobs, "_lock_session", lambda session: None)
    both_checked = threading.Barrier(2, timeout=10)
    real = jobs.active_job

    def checked_together(of: Session) -> CompactionJob | None:
        found = real(of)
        both_checked.wait()
        return found

    monkeypatch.setattr(jobs, "active_job", _first_calls(2, checked_together, real))
    results: list[Any] = []

    def request() -> None:
        try:
            results.append(queue_compaction(Session.objects.get(pk=session.pk), params={}))
        except BaseException as error:
            results.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=request, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert all(isinstance(result, tuple) for result in results), results
    assert sorted(queued_now for _, queued_now in results) == [False, True]
    assert len({job.pk for job, _ in results}) == 1
    assert CompactionJob.objects.filter(session=session).count() == 1


def test_migration_0011_fails_all_active_jobs_of_a_session_but_one(session: Session) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("sessions_app", "0010_proxy_overhead")])
    try:
        now = timezone.now()

        def job(status: str, age: int) -> CompactionJob:
            made = CompactionJob.objects.create(session=session, status=status)
            CompactionJob.objects.filter(pk=made.pk).update(created_at=now - timedelta(minutes=age))
            return made

        older, running, newer = job("queued", 3), job("running", 1), job("queued", 2)
        done = job("succeeded", 9)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())

    statuses = dict(CompactionJob.objects.values_list("pk", "status"))
    assert statuses == {
        running.pk: "running",
        older.pk: "failed",
        newer.pk: "failed",
        done.pk: "succeeded",
    }
    assert "already active" in CompactionJob.objects.get(pk=older.pk).error


def _first_calls(count: int, replacement: ActiveJob, real: ActiveJob) -> ActiveJob:
    """active_job answered by `replacement` for its first `count` calls, then by `real`."""
    calls = iter(range(count))
    lock = threading.Lock()

    def active_job(session: Session) -> CompactionJob | None:
        with lock:
            early = next(calls, None) is not None
        return replacement(session) if early else real(session)

    return active_job
