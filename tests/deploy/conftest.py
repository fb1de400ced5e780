"""Fixtures for deployment tests: subprocess environments, throwaway databases, processes.

These tests run ctxweb the way it is deployed: `manage.py` commands, `db_worker` and gunicorn
as subprocesses with their own environment and data directory, against a throwaway SQLite
file or a throwaway PostgreSQL database (created here, dropped afterwards).
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.support import postgres

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
#: The local PostgreSQL server (no database part); CTXWEB_TEST_PG_URL overrides it.
DEFAULT_PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
#: Environment variables of the test process that must not leak into a subprocess.
_PRIVATE_PREFIXES = ("CTXWEB_", "DJANGO_", "ANTHROPIC_", "AWS_")
_PRIVATE_NAMES = ("DATABASE_URL", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")


def subprocess_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a ctxweb subprocess: its own data dir, no test leftovers."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_PRIVATE_PREFIXES) and key not in _PRIVATE_NAMES
    }
    env["CTXWEB_DATA_DIR"] = str(data_dir)
    env["DJANGO_SETTINGS_MODULE"] = "ctxweb.settings"
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def production_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a production deployment (DEBUG off, a real secret key)."""
    return subprocess_env(
        data_dir,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS="ctxweb.example.com,127.0.0.1",
        CTXWEB_STATIC_FINDERS="0",
        **extra,
    )


def manage(
    env: Mapping[str, str], *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `manage.py ARGS` in a subprocess; a failure shows its output."""
    completed = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and completed.returncode != 0:
        pytest.fail(
            f"manage.py {' '.join(args)} exited {completed.returncode}\n"
            f"stdout:\n{completed.stdout[-4000:]}\nstderr:\n{completed.stderr[-4000:]}"
        )
    return completed


#: Marks the line of JSON that a `shell_call` snippet prints.
RESULT_MARK = "CTXWEB-RESULT:"


def shell_call(env: Mapping[str, str], function: str, *args: Any, timeout: float = 120) -> Any:
    """Call `tests.deploy.remote.<function>(*args)` inside `manage.py shell`; its JSON result."""
    code = (
        "import json; from tests.deploy import remote; "
        f"print({RESULT_MARK!r} + json.dumps(remote.{function}(*json.loads({json.dumps(args)!r}))))"
    )
    completed = manage(env, "shell", "-c", code, timeout=timeout)
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    pytest.fail(f"no result from remote.{function}: {completed.stdout[-2000:]}")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Processes:
    """Subprocesses started by a test; all stopped (TERM, then KILL) when it ends."""

    log_dir: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, name: str, args: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("wb")
        process = subprocess.Popen(
            args, cwd=REPO, env=dict(env), stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.started.append(process)
        return process

    def worker(self, name: str, env: Mapping[str, str], *extra: str) -> subprocess.Popen[bytes]:
        """A `manage.py db_worker` process polling every 0.2 s."""
        args = [PYTHON, "manage.py", "db_worker", "--no-reload", "--interval", "0.2"]
        return self.start(name, [*args, "--no-startup-delay", "--worker-id", name, *extra], env)

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in self.started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    """Start subprocesses with `processes.start(...)`; they are stopped after the test."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    group = Processes(log_dir)
    try:
        yield group
    finally:
        group.stop_all()


# --- gunicorn ---------------------------------------------------------------------------

#: The production server as deployed (docs/deployment.md).
GUNICORN = [PYTHON, "-m", "gunicorn", "-c", "ctxweb/gunicorn.conf.py"]
#: Headers of a request that came through the TLS-terminating reverse proxy.
PROXIED = {"Host": "127.0.0.1", "X-Forwarded-Proto": "https"}


def health_status(port: int, timeout: float = 10) -> int | None:
    """The status of `GET /api/health` as the reverse proxy forwards it; None: no answer
    within `timeout` seconds."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/api/health", headers=PROXIED)
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


@dataclass(frozen=True)
class Served:
    """A running gunicorn: its port, its environment, its process and, when a user was
    seeded, that user's API key."""

    port: int
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    key: str = ""


@dataclass(frozen=True)
class Gunicorn:
    """`gunicorn(DATABASE_URL, ...)` starts ctxweb's production server for a test (see
    `__call__`); it is stopped with the test's other processes."""

    processes: Processes
    data_dir: Path

    def __call__(
        self,
        database_url: str,
        *,
        workers: int = 1,
        migrate: bool = True,
        collectstatic: bool = False,
        seed_user: str = "",
        healthy: bool = True,
        **settings: str,
    ) -> Served:
        """Production settings (`settings`: more environment variables) on a free port:
        migrate (and collectstatic) first, seed a user with an API key when `seed_user`
        names one, then wait until `/api/health` answers 200 (any status unless `healthy`).
        Fails with gunicorn's log when it exits instead."""
        port = free_port()
        env = production_env(
            self.data_dir,
            DATABASE_URL=database_url,
            CTXWEB_BIND=f"127.0.0.1:{port}",
            CTXWEB_WEB_WORKERS=str(workers),
            **settings,
        )
        if migrate:
            manage(env, "migrate", "--no-input", "-v", "0")
        if collectstatic:
            manage(env, "collectstatic", "--no-input", "-v", "0")
        key = str(shell_call(env, "seed_user", seed_user)["key"]) if seed_user else ""
        server = self.processes.start("gunicorn", GUNICORN, env)

        def answers() -> bool:
            if healthy:
                return health_status(port) == 200
            # With the database down, an ASGI process on PostgreSQL answers once its
            # connection pool gives up waiting (CTXWEB_DB_POOL_TIMEOUT, 10 s by default).
            return health_status(port, timeout=30) is not None

        wait_for(lambda: answers() or server.poll() is not None, 60, "gunicorn to answer")
        assert server.poll() is None, self.processes.log("gunicorn")[-3000:]
        return Served(port, env, server, key)


@pytest.fixture
def gunicorn(tmp_path: Path, processes: Processes) -> Gunicorn:
    """Start ctxweb under gunicorn with `gunicorn(DATABASE_URL, ...)` (Gunicorn.__call__)."""
    return Gunicorn(processes, tmp_path)


# --- PostgreSQL -------------------------------------------------------------------------


def pg_server_url() -> str:
    """The PostgreSQL server to create throwaway databases on (no database part)."""
    explicit = os.environ.get("CTXWEB_TEST_PG_URL")
    if explicit:
        return explicit.rstrip("/")
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(database_url)
        return urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return DEFAULT_PG_SERVER


@pytest.fixture
def pg_database() -> Iterator[str]:
    """The URL of a throwaway PostgreSQL database (skips when no server answers)."""
    server = pg_server_url()
    if not postgres.available(server):
        pytest.skip(f"PostgreSQL not reachable at {server}")
    with postgres.throwaway_database(server, "ctxweb_f") as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of a throwaway SQLite file."""
    return f"sqlite:///{tmp_path / 'ctxweb.sqlite3'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A throwaway database URL, once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ctxweb.sqlite3'}"
    url: str = request.getfixturevalue("pg_database")
    return url


def query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql` run on a throwaway database, read directly (no Django)."""
    if database_url.startswith("sqlite:///"):
        import sqlite3

        path = database_url.removeprefix("sqlite:///")
        # sqlite3's own context manager only commits; closing() closes the connection.
        with closing(sqlite3.connect(path, timeout=20)) as db:
            return list(db.execute(sql.replace("%s", "?"), params).fetchall())
    import psycopg

    with psycopg.connect(database_url, connect_timeout=3) as connection:
        return list(connection.execute(sql, params).fetchall())


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` every 0.2 s until true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)
