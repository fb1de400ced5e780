"""The reaper of lost jobs: unit cases, and a real `db_worker` killed with SIGKILL mid-job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from sessions_app.models import CompactionJob, Session
from sessions_app.services.background.jobs import enqueue_compaction
from sessions_app.services.background.reaper import reap_stale_jobs
from tests.sessions_app.reaper_scenario import MARKER
from tests.support import postgres

ROOT = Path(settings.BASE_DIR)


def running(job: CompactionJob, *, heartbeat_age: float, attempts: int = 1) -> None:
    """Make `job` look claimed by a worker whose last heartbeat is `heartbeat_age` s old."""
    stamp = timezone.now() - timedelta(seconds=heartbeat_age)
    CompactionJob.objects.filter(pk=job.pk).update(
        status="running", attempts=attempts, started_at=stamp, heartbeat_at=stamp
    )
    DBTaskResult.objects.filter(id=job.task_id).update(status="RUNNING", started_at=stamp)


@pytest.fixture
def job(make_session: Any) -> CompactionJob:
    session: Session = make_session(messages=[{"role": "user", "content": "hi"}])
    return enqueue_compaction(session, params={"trigger": "manual"})


@pytest.mark.django_db
def test_a_lost_job_is_failed_and_queued_once_more(job: CompactionJob) -> None:
    first_task = job.task_id
    running(job, heartbeat_age=120)
    assert reap_stale_jobs(60) == [str(job.pk)]
    job.refresh_from_db()
    assert job.status == "queued"
    assert job.phase == "requeued"
    assert job.task_id != first_task
    assert DBTaskResult.objects.get(id=first_task).status == "FAILED"
    assert DBTaskResult.objects.get(id=job.task_id).status == "READY"
    assert job.events[-1]["phase"] == "worker_lost"
    # Lost again on its second attempt: failed for good.
    running(job, heartbeat_age=120, attempts=2)
    assert reap_stale_jobs(60) == [str(job.pk)]
    job.refresh_from_db()
    assert job.status == "failed"
    assert "not retried" in job.error
    assert job.finished_at is not None


@pytest.mark.django_db
def test_a_job_with_a_fresh_heartbeat_is_left_alone(job: CompactionJob) -> None:
    running(job, heartbeat_age=5)
    assert reap_stale_jobs(60) == []
    job.refresh_from_db()
    assert job.status == "running"


@pytest.mark.django_db
def test_a_task_claimed_by_a_worker_that_died_before_starting_the_job(job: CompactionJob) -> None:
    stamp = timezone.now() - timedelta(seconds=120)
    DBTaskResult.objects.filter(id=job.task_id).update(status="RUNNING", started_at=stamp)
    assert reap_stale_jobs(60) == [str(job.pk)]
    job.refresh_from_db()
    assert job.status == "queued"
    assert DBTaskResult.objects.get(id=job.task_id).status == "READY"


# --- a real worker, killed -----------------------------------------------------------------


def _database_url() -> AbstractContextManager[str | None]:
    """DATABASE_URL for the subprocesses: a throwaway PostgreSQL database when the suite runs
    on PostgreSQL, else None (a SQLite file in the test's data directory)."""
    if connection.vendor != "postgresql":
        return nullcontext(None)
    server = postgres.server_url(connection.settings_dict)
    return postgres.throwaway_database(server, "ctxweb_reaper")


#: Run in a subprocess with the job's id: its heartbeat goes stale at once, with no waiting.
_BACKDATE_HEARTBEAT = """
import sys
from datetime import timedelta

import django

django.setup()
from django.utils import timezone

from sessions_app.models import CompactionJob

stamp = timezone.now() - timedelta(minutes=10)
CompactionJob.objects.filter(pk=sys.argv[1]).update(heartbeat_at=stamp, started_at=stamp)
"""


def _run(env: dict[str, str], *args: str, timeout: float = 60) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _worker(env: dict[str, str], *extra: str) -> list[str]:
    return [
        sys.executable,
        "manage.py",
        "db_worker",
        "--no-reload",
        "--no-startup-delay",
        "--interval",
        "0.1",
        *extra,
    ]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_job_is_reaped_and_the_job_rerun(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CTXWEB_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="tests.sessions_app.worker_settings",
        PYTHONPATH=str(ROOT),
    )
    with _database_url() as url:
        if url:
            env["DATABASE_URL"] = url
        _run(env, "manage.py", "migrate", "--no-input", "-v0", timeout=120)
        job_id = (
            _run(env, "-m", "tests.sessions_app.reaper_scenario", "setup").strip().splitlines()[-1]
        )
        worker = subprocess.Popen(
            _worker(env), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            marker = tmp_path / MARKER
            deadline = time.monotonic() + 30
            while not marker.exists():
                assert worker.poll() is None, "the worker exited early"
                assert time.monotonic() < deadline, "the job never reached the summarizer"
                time.sleep(0.1)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(10)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        stuck = json.loads(_run(env, "-m", "tests.sessions_app.reaper_scenario", "inspect", job_id))
        assert stuck["status"] == "running"
        assert list(stuck["tasks"].values()) == ["RUNNING"]
        _run(env, "-c", _BACKDATE_HEARTBEAT, job_id)
        # A new worker reaps on start, re-queues the job once and runs it; --batch then exits.
        _run(env, *_worker(env, "--batch")[1:], timeout=60)
        final = json.loads(_run(env, "-m", "tests.sessions_app.reaper_scenario", "inspect", job_id))
    assert final["status"] == "succeeded", final
    assert final["attempts"] == 2
    assert "worker_lost" in final["phases"]
    assert final["phases"][-1] == "done"
    assert sorted(final["tasks"].values()) == ["FAILED", "SUCCESSFUL"]
    assert "sessions_app.services.background.jobs.WorkerLost" in final["task_errors"]
    assert final["compactions"] == [[1, "succeeded"]]
    assert final["compaction"] == 1
