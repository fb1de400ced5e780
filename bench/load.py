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
import http.client
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from bench.common import goal, table
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

MIX = (("append", 0.6), ("context", 0.3), ("check", 0.1))
GOAL_P99_MS = 250.0
# A background compaction of a context that a summary would not shrink (one compacted a
# moment ago) ends `failed` with this error and leaves the session unchanged: the engine's
# answer, counted apart from the errors.
NOTHING_TO_SAVE = "compaction failed: no_savings"
WORDS = [
    "the",
    "parser",
    "fails",
    "on",
    "empty",
    "input",
    "so",
    "we",
    "add",
    "a",
    "guard",
    "and",
    "rerun",
    "the",
    "tests",
    "in",
    "src/app/models.py",
    "then",
    "fix",
    "the",
    "migration",
    "and",
    "update",
    "the",
    "README",
    "before",
    "deploy",
]


@dataclass
class Stats:
    """Latencies (ms) per request kind, and errors."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = field(default_factory=time.monotonic)
    #: (ms, kind, seconds into the run) of every request, to find when the slowest came.
    timeline: list[tuple[float, str, float]] = field(default_factory=list)

    def record(self, kind: str, millis: float, error: str | None) -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append(millis)
            self.timeline.append((millis, kind, time.monotonic() - self.started - millis / 1000))
            if error:
                self.errors.append(f"{kind}: {error}")

    def slowest(self, count: int = 5) -> list[str]:
        """The slowest requests, each with the second of the run it was sent at."""
        top = sorted(self.timeline, reverse=True)[:count]
        return [f"{kind} {ms:,.0f} ms sent at {at:.1f} s" for ms, kind, at in top]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


class Api:
    """One keep-alive connection to the server, authenticated with an API key."""

    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Host": "127.0.0.1",
        }
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON answer, or the answer's text when it is not JSON). A
        connection that failed in any way is replaced, so the next call starts clean."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=data, headers=self.headers)
                response = self.connection.getresponse()
                raw = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # gunicorn closed an idle keep-alive connection (or recycled a worker).
                self._reconnect()
                if attempt == 2:
                    raise
                continue
            except Exception:
                self._reconnect()  # a timeout leaves the connection mid-answer
                raise
            return response.status, _decoded(raw)
        raise AssertionError("unreachable")

    def _reconnect(self) -> None:
        self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)


def _decoded(raw: bytes) -> Any:
    """The JSON answer; an error page that is not JSON comes back as (the start of) its text."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw[:500].decode("utf-8", "replace")


def field_of(body: Any, name: str) -> Any:
    """`body[name]` when the answer is an object holding it, else None (an error answer)."""
    return body.get(name) if isinstance(body, dict) else None


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Client(threading.Thread):
    """One simulated agent: appends turns to its session, reads the context, checks."""

    def __init__(
        self, port: int, key: str, session_id: str, stats: Stats, until: float, seed: int
    ) -> None:
        super().__init__(daemon=True)
        self.api = Api(port, key)
        self.session_id = session_id
        self.stats = stats
        self.until = until
        self.rng = random.Random(seed)
        self.appended = 0
        self.context_tokens = 0

    def run(self) -> None:
        kinds = [kind for kind, _ in MIX]
        weights = [weight for _, weight in MIX]
        while time.monotonic() < self.until:
            kind = self.rng.choices(kinds, weights)[0]
            started = time.perf_counter()
            error = None
            try:
                status, body = getattr(self, kind)()
                if status >= 400:
                    error = f"HTTP {status}: {str(body)[:200]}"
            except Exception as exc:  # a failed request is an error to count, not a crash
                error = f"{type(exc).__name__}: {exc}"
            self.stats.record(kind, (time.perf_counter() - started) * 1000, error)

    def append(self) -> tuple[int, Any]:
        usage = {"input_tokens": self.context_tokens, "output_tokens": 60}
        turn = [
            {"role": "user", "content": _text(self.rng, 40)},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": _text(self.rng, 60)}],
                "usage": usage,
            },
        ]
        status, body = self.api.call(
            "POST", f"/api/sessions/{self.session_id}/messages", {"messages": turn}
        )
        if status == 201:
            self.appended += len(turn)
            self.context_tokens = int(field_of(body, "context_tokens") or self.context_tokens)
        return status, body

    def context(self) -> tuple[int, Any]:
        return self.api.call("GET", f"/api/sessions/{self.session_id}/context")

    def check(self) -> tuple[int, Any]:
        return self.api.call("POST", f"/api/sessions/{self.session_id}/check", {})


class Compactor(threading.Thread):
    """Asks for a background compaction of a random session every `interval` seconds."""

    def __init__(
        self, port: int, key: str, sessions: list[str], until: float, interval: float = 2.0
    ) -> None:
        super().__init__(daemon=True)
        self.api = Api(port, key)
        self.sessions = sessions
        self.until = until
        self.interval = interval
        self.jobs: list[str] = []
        self.refused: list[int] = []
        self.errors: list[str] = []

    def run(self) -> None:
        rng = random.Random(7)
        while time.monotonic() + self.interval < self.until:
            time.sleep(self.interval)
            session_id = rng.choice(self.sessions)
            try:
                status, body = self.api.call(
                    "POST", f"/api/sessions/{session_id}/compactions", {"background": True}
                )
            except Exception as exc:  # counted, not raised: the thread goes on
                self.errors.append(f"compaction request: {type(exc).__name__}: {exc}")
                continue
            if status == 202 and field_of(body, "job_id"):
                self.jobs.append(str(body["job_id"]))
            elif status >= 500:
                self.errors.append(f"compaction request: HTTP {status}: {str(body)[:200]}")
            else:  # 409 (a compaction already running, nothing to compact): not an error
                self.refused.append(status)


# --- one run ------------------------------------------------------------------------------


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
            {"role": "user" if n % 2 == 0 else "assistant", "content": _text(rng, 50)}
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
    return _figures(seeder, stats, elapsed, workers, compactor)


def _figures(
    api: Api,
    stats: Stats,
    elapsed: float,
    clients: list[Client],
    compactor: Compactor,
) -> dict[str, Any]:
    every = [ms for values in stats.latencies.values() for ms in values]
    problems = [*stats.errors, *compactor.errors]
    lost = 0
    compactions = 0
    for client in clients:
        status, body = _read(api, f"/api/sessions/{client.session_id}")
        stored, compacted = field_of(body, "message_count"), field_of(body, "compaction_count")
        if status != 200 or stored is None:
            problems.append(f"session {client.session_id} not verified: {status} {str(body)[:200]}")
            continue
        lost += 20 + client.appended - int(stored)
        compactions += int(compacted or 0)
    jobs = []
    for job in compactor.jobs:
        status, body = _read(api, f"/api/jobs/{job}")
        state = str(field_of(body, "status") or f"unreadable ({status})")
        error = str(field_of(body, "error") or "")
        if state == "failed" and error == NOTHING_TO_SAVE:
            state = "nothing to save"
        elif state not in {"succeeded", "queued", "running"}:  # the last two: not done yet
            problems.append(f"job {job} {state}: {error[:300]}")
        jobs.append(state)
    return {
        "requests": len(every),
        "seconds": round(elapsed, 1),
        "throughput_rps": round(len(every) / elapsed, 1),
        "p50_ms": round(percentile(every, 50), 1),
        "p99_ms": round(percentile(every, 99), 1),
        "mean_ms": round(statistics.fmean(every), 1) if every else 0.0,
        "by_kind": {
            kind: {
                "count": len(values),
                "p50_ms": round(percentile(values, 50), 1),
                "p99_ms": round(percentile(values, 99), 1),
            }
            for kind, values in sorted(stats.latencies.items())
        },
        "errors": len(problems),
        "first_errors": problems[:5],
        "compactions_stored": compactions,
        "background_jobs": {status: jobs.count(status) for status in sorted(set(jobs))},
        "compaction_requests_refused": compactor.refused,
        "slowest": stats.slowest(),
        "messages_lost": lost,
    }


def _read(api: Api, path: str) -> tuple[int, Any]:
    """GET `path`; a failed call is (0, its error), to report, never raised."""
    try:
        return api.call("GET", path)
    except Exception as exc:
        return 0, f"{type(exc).__name__}: {exc}"


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


def _report(kind: str, figures: dict[str, Any], rows: list[list[object]]) -> list[str]:
    """Adds `kind`'s row to `rows`; its goal line and notes."""
    if "failure" in figures:
        rows.append([kind, "-", "-", "-", "-", "-", "-", "-", "-", "-"])
        return [goal(f"{kind}: the run failed", False), f"- {kind}: {figures['failure']}"]
    jobs = ", ".join(f"{n} {s}" for s, n in figures["background_jobs"].items()) or "none"
    rows.append(
        [
            kind,
            f"{figures['requests']:,} in {figures['seconds']:.0f} s",
            f"{figures['throughput_rps']:.0f} req/s",
            f"{figures['p50_ms']:.1f} ms",
            f"{figures['p99_ms']:.1f} ms",
            f"{figures.get('server_cpu_ms', '-')} ms",
            " / ".join(f"{v['p99_ms']:.0f}" for v in figures["by_kind"].values()),
            figures["errors"],
            f"{figures['compactions_stored']} (jobs: {jobs})",
            figures["messages_lost"],
        ]
    )
    met = (
        figures["errors"] == 0 and figures["p99_ms"] < GOAL_P99_MS and not figures["messages_lost"]
    )
    lines = [
        goal(
            f"{kind}: {figures['errors']} errors, p99 {figures['p99_ms']:.0f} ms, "
            f"{figures['messages_lost']} messages lost (0, < {GOAL_P99_MS:.0f} ms, 0)",
            met,
        )
    ]
    lines += [f"- {kind}: first errors: {e}" for e in figures["first_errors"]]
    lines += [f"- {kind}: server log: {e}" for e in figures.get("server_log", [])]
    if figures["p99_ms"] >= GOAL_P99_MS:
        lines.append(f"- {kind}: slowest requests: {'; '.join(figures['slowest'])}")
    return lines


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
        lines += _report(kind, figures, rows)
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
