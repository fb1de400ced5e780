"""`manage.py db_worker`: reconnects with backoff when the database is lost, writes a heartbeat.

The database "drops" through an execute wrapper: while it is down, every statement of the
worker's connection raises OperationalError as a lost PostgreSQL connection does. The waits
between reconnection attempts go to a list instead of sleeping, so nothing here is timed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import OperationalError, ProgrammingError, connection
from django.utils import timezone
from django_tasks_db.compat import task_finished
from django_tasks_db.models import DBTaskResult

from sessions_app.management.commands.db_worker import ReconnectingWorker, backoff_delays
from sessions_app.models import CompactionJob, Session
from sessions_app.services.background.heartbeat import read_worker_heartbeat, write_worker_heartbeat
from sessions_app.services.background.jobs import enqueue_compaction

LOST = "server closed the connection unexpectedly"


class DatabaseDown:
    """An execute wrapper failing every statement while `down()` is true."""

    def __init__(self, down: Callable[[], bool]) -> None:
        self.down = down
        self.refused = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.down():
            self.refused += 1
            raise OperationalError(LOST)
        return execute(sql, params, many, context)


def _worker(slept: list[float], **options: Any) -> ReconnectingWorker:
    defaults: dict[str, Any] = {
        "queue_names": ["default"],
        "interval": 0,
        "batch": True,
        "backend_name": "default",
        "startup_delay": False,
        "max_tasks": None,
        "worker_id": "worker-test",
        "excluded_queue_names": [],
    }

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        # A worker that waits forever fails the test instead of hanging the run.
        assert len(slept) < 50, f"the worker kept reconnecting: {slept[:10]}..."

    return ReconnectingWorker(sleep=sleep, **{**defaults, **options})


@pytest.fixture
def queued(make_session: Any, make_profile: Any, conversation: Any, scripted: Any) -> Any:
    """Queue a background compaction of a new session; returns a function making one."""
    scripted(default="Goals and key decisions:\n- compacted after the outage")
    profile = make_profile(keep_recent_messages=4, steps=["summary"])

    def make() -> CompactionJob:
        session: Session = make_session(
            messages=conversation(12), context_limit=3000, profile=profile
        )
        return enqueue_compaction(session, params={"trigger": "manual"})

    return make


def test_the_backoff_doubles_from_one_second_up_to_thirty() -> None:
    delays = backoff_delays()
    assert [next(delays) for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_loses_the_database_reconnects_and_runs_the_next_job(
    queued: Callable[[], CompactionJob], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = queued(), queued()
    slept: list[float] = []
    outage = {"down": False}

    def drop_after_the_first_job(**_: Any) -> None:
        outage["down"] = not slept  # the connection drops once, right after the first job

    def down() -> bool:
        # Back after the fourth wait: three reconnection attempts fail before that.
        if outage["down"] and len(slept) >= 4:
            outage["down"] = False
        return outage["down"]

    worker = _worker(slept)
    task_finished.connect(drop_after_the_first_job)
    try:
        with (
            connection.execute_wrapper(DatabaseDown(down)),
            caplog.at_level(logging.WARNING, logger="sessions_app"),
        ):
            worker.run()  # --batch: returns once no job is left
    finally:
        task_finished.disconnect(drop_after_the_first_job)
    assert slept == [1, 2, 4, 8]
    for job in (first, second):
        job.refresh_from_db()
        assert job.status == "succeeded", job.error
        assert DBTaskResult.objects.get(id=job.task_id).status == "SUCCESSFUL"
    assert f"database unavailable ({LOST}); reconnecting in 1 s" in caplog.text
    assert "reconnecting in 8 s" in caplog.text
    assert "database reachable again after 4 attempt(s)" in caplog.text
    assert worker.state == "polling"


@pytest.mark.django_db(transaction=True)
def test_an_unavailable_database_at_start_is_waited_for(
    queued: Callable[[], CompactionJob],
) -> None:
    job = queued()
    slept: list[float] = []
    refusing = DatabaseDown(lambda: len(slept) < 7)
    with connection.execute_wrapper(refusing):
        _worker(slept).run()
    assert slept == [1, 2, 4, 8, 16, 30, 30], "capped at 30 s"
    assert refusing.refused == 7  # the first claim, then six failed reconnection attempts
    job.refresh_from_db()
    assert job.status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_other_database_errors_still_stop_the_worker(queued: Any) -> None:
    queued()
    slept: list[float] = []

    def bad_sql(*_: Any) -> Any:
        raise ProgrammingError("relation does not exist")

    with connection.execute_wrapper(bad_sql), pytest.raises(ProgrammingError):
        _worker(slept).run()
    assert slept == [], "only a lost connection is waited for"


# --- the heartbeat -------------------------------------------------------------------------


# transaction=True: the worker closes old connections on every loop (django-tasks-db), which on
# PostgreSQL closes the connection holding a test's transaction (SQLite's in-memory test
# database ignores the close): the worker then waited for the database for ever.
@pytest.mark.django_db(transaction=True)
def test_the_command_writes_a_heartbeat_with_its_worker_id(monkeypatch: Any) -> None:
    # The worker's SIGTERM/SIGINT handlers would outlive the command in this process.
    monkeypatch.setattr(ReconnectingWorker, "configure_signals", lambda self: None)

    def fail(self: ReconnectingWorker, error: BaseException) -> None:
        raise AssertionError(f"the worker lost the database: {error}")

    monkeypatch.setattr(ReconnectingWorker, "reconnect", fail)  # a failure, never a wait
    call_command(
        "db_worker", "--batch", "--no-reload", "--no-startup-delay", "--worker-id", "beat-1"
    )
    beat = read_worker_heartbeat()
    assert beat is not None
    assert beat.worker_id == "beat-1"
    assert beat.state == "polling"
    assert timezone.now() - beat.at < timedelta(minutes=5)


def test_a_heartbeat_replaces_the_previous_one(tmp_path: Any) -> None:
    stamp = timezone.now()
    write_worker_heartbeat("a", "polling", now=stamp - timedelta(seconds=30))
    write_worker_heartbeat("b", "reconnecting", now=stamp)
    beat = read_worker_heartbeat()
    assert beat is not None
    assert (beat.worker_id, beat.state, beat.at) == ("b", "reconnecting", stamp)
    folder = tmp_path / "blobs" / "health"
    if folder.exists():
        assert [p.name for p in folder.iterdir()] == ["worker-heartbeat.json"]
