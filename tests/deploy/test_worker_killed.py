"""A `db_worker` SIGKILLed in the middle of a compaction: the job is reaped and run again once.

The worker is killed while it waits for the summary model (a local fake that hangs); a new
worker's reaper notices the silent heartbeat, fails the lost task result, queues the job
again (attempt 2), and runs it. Killed twice, the job ends failed and says why. Either way
the session is never half-written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_anthropic import FakeAnthropic, Reply

from .conftest import Processes, manage, production_env, query, shell_call, wait_for

pytestmark = pytest.mark.slow

MESSAGES = 60


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def _job_status(database_url: str) -> str:
    rows = query(database_url, "SELECT status FROM sessions_app_compactionjob")
    return str(rows[0][0])


def _env(tmp_path: Path, database_url: str, fake: FakeAnthropic) -> dict[str, str]:
    return production_env(
        tmp_path,
        DATABASE_URL=database_url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=fake.base_url,
        CTXWEB_SUMMARY_MODEL="claude-fake",
        CTXWEB_JOB_HEARTBEAT_SECONDS="0.5",
        CTXWEB_JOB_STALE_SECONDS="3",
        CTXWEB_REAPER_INTERVAL_SECONDS="1",
        CTXWEB_LOG_LEVEL="WARNING",
    )


def _kill_when_summarizing(
    processes: Processes, name: str, env: dict[str, str], fake: FakeAnthropic, calls: int
) -> None:
    worker = processes.worker(name, env)
    wait_for(lambda: len(fake.requests) >= calls, 60, f"{name} to call the summary model")
    worker.kill()  # SIGKILL: no cleanup, no final write
    worker.wait(timeout=10)


def test_a_killed_worker_s_job_is_rerun_once_and_succeeds(
    tmp_path: Path, any_database: str, processes: Processes, fake: FakeAnthropic
) -> None:
    fake.script(Reply.hang(120))  # the first summary request never answers; later ones do
    env = _env(tmp_path, any_database, fake)
    manage(env, "migrate", "--no-input", "-v", "0")
    seeded = shell_call(env, "seed_jobs", 1, 1, MESSAGES)

    _kill_when_summarizing(processes, "worker-a", env, fake, calls=1)
    assert _job_status(any_database) == "running"
    processes.worker("worker-b", env)
    wait_for(lambda: _job_status(any_database) in ("succeeded", "failed"), 60, "the re-run")

    report = shell_call(env, "final_report", seeded["messages"])
    (job,) = report["jobs"]
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2
    assert "worker_lost" in job["phases"]
    assert job["workers"] == ["worker-b"]
    assert report["task_statuses"] == {"FAILED": 1, "SUCCESSFUL": 1}, "the lost task is failed"
    assert list(report["sessions"].values()) == [[]]


def test_a_job_whose_worker_is_killed_twice_fails_and_changes_nothing(
    tmp_path: Path, sqlite_url: str, processes: Processes, fake: FakeAnthropic
) -> None:
    fake.default = Reply.hang(120)  # every summary request hangs
    env = _env(tmp_path, sqlite_url, fake)
    manage(env, "migrate", "--no-input", "-v", "0")
    seeded = shell_call(env, "seed_jobs", 1, 1, MESSAGES)

    _kill_when_summarizing(processes, "worker-a", env, fake, calls=1)
    _kill_when_summarizing(processes, "worker-b", env, fake, calls=2)
    processes.worker("worker-c", env)
    wait_for(lambda: _job_status(sqlite_url) == "failed", 60, "the job to be failed")

    report = shell_call(env, "final_report", seeded["messages"])
    (job,) = report["jobs"]
    assert job["attempts"] == 2
    assert "not retried" in job["error"]
    assert job["phases"].count("worker_lost") == 2
    assert report["task_statuses"] == {"FAILED": 2}
    assert len(fake.requests) == 2, "no third attempt"
    assert list(report["sessions"].values()) == [[]]
    compactions = query(sqlite_url, "SELECT count(*) FROM sessions_app_compaction")
    assert compactions == [(0,)], "nothing was committed by the killed attempts"
