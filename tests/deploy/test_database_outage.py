"""The database goes away: workers wait and reconnect, the API and /api/health answer 503 JSON.

- A `db_worker` on PostgreSQL loses its database (the database refuses connections and its
  sessions are terminated, as in a restart or failover). It stays up, backs off, says so in
  its log and heartbeat, and runs the next job once the database is back.
- gunicorn pointed at a database that does not answer: `/api/health` and an API call answer
  503 with a JSON body, never a 500 page.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

from .conftest import (
    Gunicorn,
    Processes,
    free_port,
    manage,
    pg_server_url,
    production_env,
    query,
    shell_call,
    wait_for,
)

pytestmark = pytest.mark.slow

HEARTBEAT = Path("blobs") / "health" / "worker-heartbeat.json"


@contextmanager
def database_refusing_connections(database_url: str) -> Iterator[None]:
    """The database refuses new connections and its open sessions are terminated."""
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(f"{pg_server_url()}/postgres", autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        try:
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


def _heartbeat_state(tmp_path: Path) -> str:
    try:
        return str(json.loads((tmp_path / HEARTBEAT).read_text())["state"])
    except (OSError, ValueError, KeyError):
        return ""


@pytest.mark.postgres
def test_a_worker_that_loses_the_database_reconnects_and_runs_the_next_job(
    tmp_path: Path, pg_database: str, processes: Processes
) -> None:
    env = production_env(
        tmp_path,
        DATABASE_URL=pg_database,
        CTXWEB_JOB_HEARTBEAT_SECONDS="0.3",
        CTXWEB_LOG_LEVEL="WARNING",
    )
    manage(env, "migrate", "--no-input", "-v", "0")
    worker = processes.worker("worker", env)
    wait_for(lambda: _heartbeat_state(tmp_path) == "polling", 60, "the worker's first heartbeat")

    with database_refusing_connections(pg_database):
        wait_for(
            lambda: "reconnecting in 2 s" in processes.log("worker") or worker.poll() is not None,
            60,
            "the worker's second reconnection attempt",
        )
        assert worker.poll() is None, processes.log("worker")[-3000:]
        wait_for(lambda: _heartbeat_state(tmp_path) == "reconnecting", 10, "the heartbeat")

    seeded = shell_call(env, "seed_jobs", 1, 1, 40)
    wait_for(
        lambda: (
            query(pg_database, "SELECT status FROM sessions_app_compactionjob")[0][0]
            not in ("queued", "running")
            or worker.poll() is not None
        ),
        90,
        "the job queued after the outage to finish",
    )
    assert worker.poll() is None, processes.log("worker")[-3000:]
    report = shell_call(env, "job_report")
    assert [job["status"] for job in report["jobs"]] == ["succeeded"], report
    assert [job["id"] for job in report["jobs"]] == seeded["jobs"]
    log = processes.log("worker")
    assert "database unavailable" in log
    assert "database reachable again" in log
    assert _heartbeat_state(tmp_path) == "polling"


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={"Host": "127.0.0.1", **headers})
        response = connection.getresponse()
        body = response.read()
        return response.status, response.getheader("Content-Type") or "", body
    finally:
        connection.close()


@pytest.fixture
def server_without_database(gunicorn: Gunicorn) -> int:
    """gunicorn (production settings) whose database does not answer; its port."""
    nowhere = f"postgresql://ctxweb@127.0.0.1:{free_port()}/ctxweb"  # nothing listens there
    return gunicorn(nowhere, migrate=False, healthy=False).port


HTTPS = {"X-Forwarded-Proto": "https"}


def test_with_the_database_unreachable_health_answers_503_json(
    server_without_database: int,
) -> None:
    status, kind, body = _get(server_without_database, "/api/health", HTTPS)
    assert (status, kind.split(";")[0]) == (503, "application/json"), body[:500]
    health = json.loads(body)
    assert health["detail"] == "database unreachable"
    assert health["checks"]["database"]["status"] == "error"
    assert health["checks"]["storage"]["status"] == "ok"


def test_with_the_database_unreachable_an_api_call_answers_503_json(
    server_without_database: int,
) -> None:
    # Relies on the API's mapping of database errors to 503 (sessions_app API, issue 10).
    key = {"Authorization": "Bearer ctx_000000000000_not-checked-while-the-db-is-down"}
    status, kind, body = _get(server_without_database, "/api/sessions", {**HTTPS, **key})
    assert (status, kind.split(";")[0]) == (503, "application/json"), body[:500]
    assert "detail" in json.loads(body)


def test_with_the_database_unreachable_the_proxy_waits_on_it_once_then_forwards_at_once(
    gunicorn: Gunicorn,
) -> None:
    """A caller bringing its own provider key is forwarded unrecorded (fail open); after the
    first request has waited for the pool (CTXWEB_DB_POOL_TIMEOUT), the next ones do not
    wait for it again (sessions_app/proxy/outage.py), and one relying on the server's key
    is answered 503 at once."""
    nowhere = f"postgresql://ctxweb@127.0.0.1:{free_port()}/ctxweb"
    with StreamingAnthropic() as upstream:
        served = gunicorn(
            nowhere,
            migrate=False,
            healthy=False,
            CTXWEB_DB_POOL_TIMEOUT="2",
            CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
        )
        upstream.script(*[Reply.text(f"answer {n}") for n in range(3)])
        own = {"x-api-key": "sk-ant-own", "X-Ctxweb-Key": "ctx_000000000000_unchecked"}
        times = [_proxied(served.port, own) for _ in range(3)]
        server_key = {"x-api-key": "ctx_000000000000_unchecked"}
        started = time.monotonic()
        refused = _post_message(served.port, server_key)
        refused_in = time.monotonic() - started
    assert [status for status, _, _ in times] == [200, 200, 200]
    assert [text for _, text, _ in times] == ["answer 0", "answer 1", "answer 2"]
    assert times[0][2] >= 1.5  # waited for the pool
    assert max(elapsed for _, _, elapsed in times[1:]) < 1.0
    assert refused[0] == 503
    assert refused_in < 1.0
    assert [request.api_key for request in upstream.requests] == ["sk-ant-own"] * 3


def _post_message(port: int, headers: dict[str, str]) -> tuple[int, Any]:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(
        f"http://127.0.0.1:{port}/proxy/anthropic/v1/messages",
        json=body,
        headers={"Host": "127.0.0.1", **headers},
        timeout=30,
    )
    return response.status_code, response.json()


def _proxied(port: int, headers: dict[str, str]) -> tuple[int, str, float]:
    started = time.monotonic()
    status, answer = _post_message(port, headers)
    text = answer["content"][0]["text"] if status == 200 else str(answer)
    return status, text, time.monotonic() - started
