"""The server the HTTP benchmarks drive: ctxweb under gunicorn with its production settings
(ctxweb/gunicorn.conf.py), on a throwaway SQLite file or PostgreSQL database, with the
helpers to start, wait for, measure and stop it (bench/load.py, bench/appends.py,
bench/proxy.py)."""

from __future__ import annotations

import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import postgres  # the throwaway databases the tests use too

__all__ = [
    "PG_SERVER",
    "cpu_seconds",
    "database",
    "free_port",
    "manage",
    "prepared",
    "processes",
    "server_env",
    "wait_until_up",
]

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG_SERVER = os.environ.get("CTXWEB_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_env(
    data_dir: Path, database_url: str, port: int, web_workers: int, **settings: str
) -> dict[str, str]:
    """The production-like environment of the server processes; `settings` (CTXWEB_WEB_ASGI,
    CTXWEB_CONN_MAX_AGE, ...) override or add variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CTXWEB_", "DJANGO_", "ANTHROPIC_"))
    }
    env.pop("DATABASE_URL", None)
    env.update(
        CTXWEB_DATA_DIR=str(data_dir),
        DATABASE_URL=database_url,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_SECURE_SSL_REDIRECT="0",
        CTXWEB_STATIC_FINDERS="0",
        CTXWEB_BIND=f"127.0.0.1:{port}",
        CTXWEB_WEB_WORKERS=str(web_workers),
        CTXWEB_ACCESS_LOG="",
        CTXWEB_LOG_LEVEL="WARNING",
        CTXWEB_CONN_MAX_AGE="60",
        PYTHONUNBUFFERED="1",
    )
    env.update(settings)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    completed = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    if completed.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{completed.stderr[-3000:]}")
    return completed.stdout


_SETUP = (
    "from django.core.management import call_command; "
    "call_command('migrate', interactive=False, verbosity=0); "
    "call_command('create_api_key', {name!r})"
)


def prepared(env: dict[str, str], name: str) -> str:
    """Migrate the database and issue an API key for user `name`, in one Django start."""
    return manage(env, "shell", "-c", _SETUP.format(name=name)).strip().splitlines()[-1]


@contextmanager
def database(kind: str, data_dir: Path) -> Iterator[str]:
    """A throwaway database URL: a SQLite file, or a PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{data_dir / 'load.sqlite3'}"
        return
    with postgres.throwaway_database(PG_SERVER, "ctxweb_load") as url:
        yield url


@contextmanager
def processes(
    env: dict[str, str], log_dir: Path, worker: bool = True
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """gunicorn and (unless `worker` is False) one db_worker, in that order, stopped (TERM,
    then KILL) on the way out."""
    started: list[subprocess.Popen[bytes]] = []
    commands = {
        "gunicorn": [PYTHON, "-m", "gunicorn", "-c", "ctxweb/gunicorn.conf.py"],
        "worker": [
            PYTHON,
            "manage.py",
            "db_worker",
            "--no-reload",
            "--interval",
            "0.5",
            "--no-startup-delay",
        ],
    }
    if not worker:
        del commands["worker"]
    try:
        for name, command in commands.items():
            with (log_dir / f"{name}.log").open("wb") as log:
                started.append(
                    subprocess.Popen(
                        command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
                    )
                )
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of process `pid` and its living descendants, from /proc
    (None where there is no /proc): what the server spent, whatever else the machine ran."""
    proc = Path("/proc")
    if not (proc / str(pid)).exists():
        return None
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        times[child] = sum(int(value) for value in fields[11:15]) / tick  # + reaped children
    tree = {pid}
    grown = True
    while grown:
        found = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= found
        grown = bool(found)
    return sum(times.get(member, 0.0) for member in tree)


def wait_until_up(port: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/api/health", headers={"Host": "127.0.0.1"})
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the server did not answer on port {port} within {timeout} s")
