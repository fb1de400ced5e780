"""Load test: mixed REST traffic against gunicorn while background compactions run.

    python -m bench.load                       # 60 s on SQLite, then 60 s on PostgreSQL
    python -m bench.load --seconds 15 --databases sqlite

For each database: a throwaway data dir (and, for PostgreSQL, a throwaway database on the
local server, dropped afterwards), `migrate`, gunicorn with ctxweb/gunicorn.conf.py and 2
worker processes on 127.0.0.1 (a free port), one `manage.py db_worker`. Then CLIENTS
threads, each with its own keep-alive connection and its own session, send for SECONDS:
60% appends (a user message and an assistant reply carrying `usage`, which queues automatic
compactions), 30% context reads, 10% checks; a side thread asks for a background compaction
every 2 s. Printed: throughput, p50/p99 latency per kind, the server's CPU time per
request (gunicorn's processes, from /proc), errors, compactions done, and whether every
appended message is in the stored history. An error is any failed request or answer that
is not the expected one (never a crash of this script), a session that cannot be read back,
and a background job that failed for another reason than `no_savings` (a context the
summary would not shrink, left unchanged: shown apart). `--set NAME=VALUE` tries a server
setting (`CTXWEB_WEB_ASGI=0`, `CTXWEB_DB_POOL_SIZE=4`, ...). The clients never pause, so
latency is mostly queueing: 20 clients over the throughput (docs/deployment.md, Capacity).
Loopback only; stops by itself; every process it started is stopped at the end.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from bench.common import table
from bench.load_report import load_figures, report
from bench.load_traffic import MIX, Api, Client, Compactor, Stats, text
from bench.servers import (
    PG_SERVER,
    cpu_seconds,
    database,
    free_port,
    prepared,
    processes,
    server_env,
    wait_until_up,
)
from tests.support import postgres  # the throwaway databases the tests use too


def run(
    kind: str,
    seconds: float,
    clients: int,
    web_workers: int,
    settle: float = 3.0,
    settings: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The whole load test on one database; its figures. With errors, `server_log` holds
    the error lines the server processes logged."""
    data_dir = Path(tempfile.mkdtemp(prefix=f"ctxweb-load-{kind}-"))
    try:
        with database(kind, data_dir) as database_url:
            port = free_port()
            env = server_env(data_dir, database_url, port, web_workers, **(settings or {}))
            key = prepared(env, "loadtest")
            with processes(env, data_dir) as (server, *_):
                wait_until_up(port)
                before = cpu_seconds(server.pid)
                figures = _drive(port, key, seconds, clients, settle)
                after = cpu_seconds(server.pid)
            if before is not None and after is not None and figures["requests"]:
                figures["server_cpu_ms"] = round((after - before) * 1000 / figures["requests"], 1)
            if figures["errors"] or figures["messages_lost"]:
                figures["server_log"] = _logged_errors(data_dir)
            return figures
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _logged_errors(log_dir: Path, most: int = 5) -> list[str]:
    """The last distinct error lines of the server processes' logs (the exceptions)."""
    found: list[str] = []
    for log in sorted(log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            text = line.strip()
            if "Error" in text and not text.startswith(("File ", "Traceback")):
                entry = f"{log.stem}: {text[:300]}"
                if entry not in found:
                    found.append(entry)
    return found[-most:]


def _drive(port: int, key: str, seconds: float, clients: int, settle: float) -> dict[str, Any]:
    seeder = Api(port, key)
    sessions = []
    rng = random.Random(1)
    for index in range(clients):
        history = [
            {"role": "user" if n % 2 == 0 else "assistant", "content": text(rng, 50)}
            for n in range(20)
        ]
        status, body = seeder.call(
            "POST",
            "/api/sessions",
            {"title": f"load {index}", "messages": history, "context_limit": 8000},
        )
        if status != 201:
            raise RuntimeError(f"could not create a session: {status} {body}")
        sessions.append(str(body["id"]))
    stats = Stats()
    until = time.monotonic() + seconds
    workers = [Client(port, key, sid, stats, until, seed) for seed, sid in enumerate(sessions)]
    compactor = Compactor(port, key, sessions, until)
    started = time.monotonic()
    for thread in [*workers, compactor]:
        thread.start()
    for thread in [*workers, compactor]:
        thread.join(timeout=seconds + 60)
    elapsed = time.monotonic() - started
    time.sleep(settle)  # let the worker finish the last queued jobs
    return load_figures(seeder, stats, elapsed, workers, compactor)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="traffic per database (60)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (20)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn processes (2)")
    parser.add_argument("--databases", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting to try, e.g. CTXWEB_WEB_ASGI=0 or CTXWEB_CONN_MAX_AGE=0",
    )
    parser.add_argument("--smoke", action="store_true", help="3 s, 2 clients, SQLite")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.clients, args.databases, args.web_workers = 2.0, 2, "sqlite", 1
    args.settings = dict(item.split("=", 1) for item in args.set)
    return args


def _measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """`run`, with a run that could not be driven to the end reported as a failure."""
    try:
        return run(
            kind,
            args.seconds,
            args.clients,
            args.web_workers,
            0.5 if args.smoke else 3,
            args.settings,
        )
    except Exception as exc:
        return {"failure": f"{type(exc).__name__}: {str(exc)[-1500:]}"}


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    failed = False
    rows: list[list[object]] = []
    lines: list[str] = []
    for kind in [k.strip() for k in args.databases.split(",") if k.strip()]:
        if kind == "postgres" and not postgres.available(PG_SERVER):
            lines.append(f"- postgres: skipped, no server at {PG_SERVER}")
            continue
        print(f"load: {kind}", file=sys.stderr, flush=True)
        figures = _measure(kind, args)
        lines += report(kind, figures, rows)
        failed = failed or bool(
            figures.get("failure") or figures["errors"] or figures["messages_lost"]
        )
    kinds = " / ".join(kind for kind, _ in sorted(MIX))  # by_kind is sorted by name
    print("## Load: `bench/load.py`\n")
    print(
        f"{args.clients} clients for {args.seconds:.0f} s per database: 60% appends, 30% "
        f"context reads, 10% checks, a background compaction asked every 2 s; gunicorn with "
        f"{args.web_workers} processes and one db_worker."
        + "".join(f" Server setting: `{k}={v}`." for k, v in args.settings.items())
        + "\n"
    )
    print(
        table(
            [
                "database",
                "requests",
                "throughput",
                "p50",
                "p99",
                "server CPU per request",
                f"p99 by kind ({kinds})",
                "errors",
                "compactions stored",
                "messages lost",
            ],
            rows,
        )
    )
    print()
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
