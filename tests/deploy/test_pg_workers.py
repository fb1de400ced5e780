"""Four `db_worker` processes on PostgreSQL drain 200 queued compactions, each exactly once.

django-tasks-db claims a task with `SELECT ... FOR UPDATE SKIP LOCKED` and marks it RUNNING
in the same transaction (DBTaskResultQuerySet.get_locked + DBTaskResult.claim), so two
workers never take the same row. This test checks the outcome end to end. A job that lost
a race with another compaction of its session is queued once more (a second task, run
once too); nothing else runs a job twice.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from .conftest import Processes, manage, production_env, shell_call

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# One active job per session (a second request returns the queued one), so 200 jobs are
# 200 sessions with one job each.
SESSIONS = 200
JOBS_PER_SESSION = 1
MESSAGES = 30
WORKERS = 4
DEADLINE_SECONDS = 120
BENIGN_FAILURES = ("conflict", "compaction failed: no_savings", "compaction failed: nothing_to")


def _unfinished(url: str) -> int:
    with psycopg.connect(url, connect_timeout=3) as connection:
        row = connection.execute(
            "SELECT count(*) FROM sessions_app_compactionjob WHERE status IN ('queued', 'running')"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_four_workers_run_each_of_200_jobs_exactly_once(
    tmp_path: Path, pg_database: str, processes: Processes
) -> None:
    env = production_env(tmp_path, DATABASE_URL=pg_database, CTXWEB_LOG_LEVEL="WARNING")
    manage(env, "migrate", "--no-input", "-v", "0")
    seeded = shell_call(env, "seed_jobs", SESSIONS, JOBS_PER_SESSION, MESSAGES)
    assert len(seeded["jobs"]) == SESSIONS * JOBS_PER_SESSION

    workers = [processes.worker(f"worker-{n}", env) for n in range(WORKERS)]
    deadline = time.monotonic() + DEADLINE_SECONDS
    while _unfinished(pg_database) and time.monotonic() < deadline:
        assert all(w.poll() is None for w in workers), processes.log("worker-0")[-3000:]
        time.sleep(0.5)
    processes.stop_all()

    report = shell_call(env, "final_report", seeded["messages"])
    jobs = report["jobs"]
    assert len(jobs) == SESSIONS * JOBS_PER_SESSION
    retried = [j for j in jobs if j["attempts"] == 2]
    assert report["task_results"] == len(jobs) + len(retried), "one task result per run"
    unfinished = [j for j in jobs if j["status"] not in ("succeeded", "failed")]
    assert not unfinished, f"{len(unfinished)} jobs not finished in {DEADLINE_SECONDS} s"
    for job in jobs:
        assert job["attempts"] in (1, 2), job
        if job["attempts"] == 2:
            assert "retry" in job["phases"], "re-run only after a lost race, never a lost worker"
            assert "worker_lost" not in job["phases"], job
        assert job["task_status"] == "SUCCESSFUL", job
        assert len(job["workers"]) == 1, f"task claimed by {job['workers']}"
        assert not (job["return_value"] or {}).get("skipped"), job
        if job["status"] == "failed":
            # Acceptable: another job compacted the same session first, or it left nothing
            # worth compacting again.
            assert job["error"].startswith(BENIGN_FAILURES), job
    claimed_by = Counter(job["workers"][0] for job in jobs)
    assert len(claimed_by) > 1, f"all jobs ran on one worker: {claimed_by}"
    compactions = [j["compaction"] for j in jobs if j["compaction"] is not None]
    assert len(compactions) == len(set(compactions)), "two jobs claim the same compaction"
    assert len(compactions) >= SESSIONS, "every session was compacted at least once"

    problems = report["sessions"]
    assert len(problems) == SESSIONS
    assert {sid: p for sid, p in problems.items() if p} == {}
