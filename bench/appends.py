"""Benchmark: appends through the REST API against gunicorn, one message and 100 messages
per request, from concurrent clients, with nothing lost or duplicated.

Goal (issue 14): at least 2,000 messages/s appended in batches of 100 on PostgreSQL with 4
server processes. Per database (a throwaway SQLite file; a throwaway PostgreSQL database on
CTXWEB_BENCH_PG_URL, skipped when no server answers): `migrate`, gunicorn with
ctxweb/gunicorn.conf.py and WEB_WORKERS processes on 127.0.0.1 (bench/load.py starts the
same processes), then CLIENTS threads, each with its own keep-alive connection, append a
fixed number of requests: to a session of their own, and all to one shared session (every
append locks that session's row). Each message carries a unique marker; afterwards the
stored history is read from the database and every marker must be there exactly once, in
each client's order.

Run: .venv/bin/python -m bench.appends [--smoke]
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.common import goal, log, options, table
from bench.load_traffic import Api
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
from tests.support import postgres

WEB_WORKERS = 4
CLIENTS = 8
GOAL_BATCHED = 2000.0


class Appender(threading.Thread):
    """One client: `requests` appends of `size` messages (user, assistant, ...) each."""

    def __init__(
        self, port: int, key: str, session_id: str, name: str, requests: int, size: int
    ) -> None:
        super().__init__(daemon=True)
        self.api = Api(port, key)
        self.session_id = session_id
        self.name = name
        self.requests = requests
        self.size = size
        self.errors: list[str] = []
        self.sent: list[str] = []

    def run(self) -> None:
        for request in range(self.requests):
            markers = [f"{self.name}-{request}-{n}" for n in range(self.size)]
            batch = [
                {"role": "user" if n % 2 == 0 else "assistant", "content": f"msg {marker} ok"}
                for n, marker in enumerate(markers)
            ]
            try:
                status, body = self.api.call(
                    "POST", f"/api/sessions/{self.session_id}/messages", {"messages": batch}
                )
            except Exception as error:  # counted, not raised: the run goes on
                self.errors.append(f"{type(error).__name__}: {error}")
                continue
            if status == 201:
                self.sent += markers
            else:
                self.errors.append(f"HTTP {status}: {str(body)[:200]}")


def _stored_markers(database_url: str, sessions: list[str]) -> dict[str, list[str]]:
    """Each session's stored message contents in seq order (read from the database)."""
    query = (
        "SELECT content FROM sessions_app_message WHERE session_id = {p} AND role IN "
        "('user', 'assistant') ORDER BY seq"
    )
    found: dict[str, list[str]] = {}
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
            for session in sessions:
                rows = db.execute(query.format(p="?"), [session.replace("-", "")]).fetchall()
                found[session] = [str(row[0]) for row in rows]
        return found
    with psycopg.connect(database_url) as db:
        for session in sessions:
            rows = db.execute(query.format(p="%s"), [session]).fetchall()
            found[session] = [str(row[0]) for row in rows]
    return found


def _check(appenders: list[Appender], stored: dict[str, list[str]]) -> tuple[int, int, bool]:
    """(lost, duplicated, each client's order kept) over all appenders."""
    seen: dict[str, int] = {}
    order_kept = True
    for contents in stored.values():
        for content in contents:
            marker = content.split()[1] if content.count(" ") >= 2 else ""
            seen[marker] = seen.get(marker, 0) + 1
    for appender in appenders:
        mine = [
            content.split()[1]
            for content in stored.get(appender.session_id, [])
            if content.split()[1].startswith(f"{appender.name}-")
        ]
        order_kept = order_kept and mine == appender.sent
    sent = [marker for appender in appenders for marker in appender.sent]
    lost = sum(1 for marker in sent if marker not in seen)
    duplicated = sum(count - 1 for count in seen.values() if count > 1)
    return lost, duplicated, order_kept


def scenario(
    port: int, key: str, database_url: str, shared: bool, size: int, requests: int
) -> dict[str, Any]:
    """One run: CLIENTS appenders, `requests` requests of `size` messages each."""
    seeder = Api(port, key)
    sessions: list[str] = []
    for index in range(1 if shared else CLIENTS):
        status, body = seeder.call("POST", "/api/sessions", {"title": f"appends {index}"})
        if status != 201:
            raise RuntimeError(f"could not create a session: {status} {body}")
        sessions.append(str(body["id"]))
    appenders = [
        Appender(port, key, sessions[0 if shared else n], f"c{n}", requests, size)
        for n in range(CLIENTS)
    ]
    started = time.perf_counter()
    for appender in appenders:
        appender.start()
    for appender in appenders:
        appender.join(timeout=600)
    elapsed = time.perf_counter() - started
    lost, duplicated, ordered = _check(appenders, _stored_markers(database_url, sessions))
    sent = sum(len(appender.sent) for appender in appenders)
    return {
        "rate": sent / elapsed,
        "messages": sent,
        "errors": sum(len(appender.errors) for appender in appenders),
        "lost": lost,
        "duplicated": duplicated,
        "ordered": ordered,
    }


def run(kind: str, smoke: bool) -> list[tuple[str, dict[str, Any]]]:
    data_dir = Path(tempfile.mkdtemp(prefix=f"ctxweb-appends-{kind}-"))
    results: list[tuple[str, dict[str, Any]]] = []
    with database(kind, data_dir) as database_url:
        port = free_port()
        env = server_env(data_dir, database_url, port, 1 if smoke else WEB_WORKERS)
        key = prepared(env, "appends")
        with processes(env, data_dir, worker=False) as (server, *_):
            wait_until_up(port)
            if not smoke:  # untimed: each worker loads the app and the vocabulary on first use
                scenario(port, key, database_url, False, 10, 3)
            plans = (
                [(True, 100, 1)]
                if smoke
                else [
                    (shared, size, requests)
                    for shared in (False, True)
                    for size, requests in ((1, 100), (100, 15))
                ]
            )
            for shared, size, requests in plans:
                where = "one shared session" if shared else "a session each"
                log(f"appends: {kind}, {size} per request, {where}")
                before = cpu_seconds(server.pid)
                figures = scenario(port, key, database_url, shared, size, requests)
                after = cpu_seconds(server.pid)
                if before is not None and after is not None and figures["messages"]:
                    # CPU the server processes spent per message: what a busy machine
                    # moves least (PostgreSQL's own time not counted).
                    figures["cpu_ms"] = (after - before) * 1000 / figures["messages"]
                results.append((f"{size} per request, {where}", figures))
    return results


def main(argv: Sequence[str] | None = None) -> None:
    args = options(__doc__, argv)
    kinds = ["sqlite"]
    if not args.smoke and postgres.available(PG_SERVER):
        kinds.append("postgres")
    workers = 1 if args.smoke else WEB_WORKERS
    rows: list[list[object]] = []
    goals: list[str] = []
    for kind in kinds:
        name = "SQLite (WAL)" if kind == "sqlite" else "PostgreSQL 127.0.0.1"
        for label, figures in run(kind, args.smoke):
            rows.append(_row(name, label, figures))
            goals += _goals(kind, name, label, figures)
    print("## Appends: `bench/appends.py`\n")
    print(
        f"{CLIENTS} concurrent clients against gunicorn with {workers} processes "
        "(production settings, persistent connections; no db_worker).\n"
    )
    print(table(HEADERS, rows))
    print()
    print("\n".join(goals))
    if "postgres" not in kinds:
        print(f"- PostgreSQL: skipped ({'smoke run' if args.smoke else 'no server'})")


HEADERS = (
    "database",
    "requests",
    "messages/s",
    "messages",
    "server CPU per message",
    "errors",
    "lost",
    "duplicated",
    "each client's order kept",
)


def _row(name: str, label: str, figures: dict[str, Any]) -> list[object]:
    return [
        name,
        label,
        f"{figures['rate']:,.0f}",
        f"{figures['messages']:,}",
        f"{figures['cpu_ms']:.2f} ms" if "cpu_ms" in figures else "-",
        figures["errors"],
        figures["lost"],
        figures["duplicated"],
        "yes" if figures["ordered"] else "NO",
    ]


def _goals(kind: str, name: str, label: str, figures: dict[str, Any]) -> list[str]:
    safe = not (figures["lost"] or figures["duplicated"] or figures["errors"])
    goals = [
        goal(f"{name}, {label}: nothing lost, duplicated or reordered", safe and figures["ordered"])
    ]
    if kind == "postgres" and label.startswith("100 per request"):
        goals.append(
            goal(
                f"{name}, {label}: {figures['rate']:,.0f} messages/s (≥ 2,000)",
                figures["rate"] >= GOAL_BATCHED,
            )
        )
    return goals


if __name__ == "__main__":
    main()
