"""Benchmark: the web app's check, context and append paths on a stored 1M-token session,
on SQLite and on PostgreSQL.

Goals (issues 4 and 14): `check` and `context` under 20 ms each; `GET /context` cold on
PostgreSQL under 20 ms and warm under 5 ms. Each database runs in its own child process
with a throwaway database (a SQLite file; a PostgreSQL database on CTXWEB_BENCH_PG_URL,
dropped afterwards, skipped when no server answers) and persistent connections, as a
deployment uses them. The service functions and the same calls through the REST API
(Django test client, Bearer key, every middleware) are timed, median of 30 runs after a
warm-up. `context` is timed cold (the process's context cache emptied before each run, the
stored response file kept: a fresh process), rebuilt (the stored file removed too: a
first read ever, or a store the writer does not share), warm (a repeated read), right
after an append (the cached text extended by the new entry) and first after entries were
replaced: before each run the writer commits what a compaction, revert or offload commits
last (`save_entry_counters` bumping the revision; the entries themselves unchanged, so
a run costs no engine time) and rebuilds the stored text once committed (that refresh is
timed too, in the writer), then a reader in another process (nothing in memory) reads
it. Appends per
second: one message per call through the service and through the API, and 100 messages
per API request (bench/appends.py measures concurrent appenders against gunicorn).

Run: .venv/bin/python -m bench.api [--smoke]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from bench.common import goal, log, options, table

ROOT = Path(__file__).resolve().parent.parent
PG_SERVER = os.environ.get("CTXWEB_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432")
RUNS = 30
ROWS = [
    ("store the session (`create_session`, counts included)", "store_s", "s"),
    ("`check` (service)", "check (service)", "ms"),
    ("`check` (API)", "check (API)", "ms"),
    ("`context` cold (service `context_json`)", "context cold (service)", "ms"),
    ("`context` cold (API)", "context cold (API)", "ms"),
    ("`context` rebuilt, no stored text (service)", "context rebuilt (service)", "ms"),
    ("`context` rebuilt, no stored text (API)", "context rebuilt (API)", "ms"),
    ("entries replaced: the writer's refresh of the stored text", "refresh (writer)", "ms"),
    (
        "`context` first read after entries were replaced (API)",
        "context after a change (API)",
        "ms",
    ),
    ("`context` warm (service `context_json`)", "context warm (service)", "ms"),
    ("`context` warm (API)", "context warm (API)", "ms"),
    ("`context` after an append (API)", "context after an append (API)", "ms"),
    ("`context_payload` (decoded dicts, for comparison)", "context_payload (dicts)", "ms"),
    ("appends/s, one message per call (service)", "appends/s (service)", "/s"),
    ("appends/s, one message per request (API)", "appends/s (API)", "/s"),
    ("appends/s, 100 messages per request (API)", "appends/s (API, 100 per request)", "/s"),
]


def median_ms(
    action: Callable[[], Any], runs: int, before: Callable[[], Any] | None = None
) -> float:
    """Median time of `action` after a warm-up; `before` runs untimed before each run."""
    action()  # warm-up
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def child(smoke: bool) -> dict[str, Any]:
    """Run in the child process (Django set up on the database the parent chose)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from bench.histories import synthetic_session
    from sessions_app.models import ApiKey
    from sessions_app.services.sessions.lifecycle import create_session

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")
    _, key = ApiKey.issue(owner, "bench")
    messages = synthetic_session(201, 40_000) if smoke else synthetic_session(5001, 1_000_000)
    started = time.perf_counter()
    session = create_session(owner, messages=messages, context_limit=2_000_000)
    figures: dict[str, Any] = {"store_s": time.perf_counter() - started}
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    base = f"/api/sessions/{session.pk}"
    figures.update(_reads(session, client, base, 3 if smoke else RUNS))
    figures["context bytes"] = len(client.get(f"{base}/context").content)
    figures.update(_append_rates(session, client, base, smoke))
    session.refresh_from_db()
    figures["session"] = f"{session.message_count:,} messages, {session.context_tokens:,} tokens"
    figures["database"] = _database_version(connection)
    return figures


def _reads(session: Any, client: Any, base: str, runs: int) -> dict[str, float]:
    """The check and context paths, timed (median ms) by the name of each figure."""
    from sessions_app.services.context.runtime import check, context_json, context_payload
    from sessions_app.services.context.text import clear_cache

    changes = _Changes(session)

    def api_check() -> None:
        assert client.post(f"{base}/check", content_type="application/json").status_code == 200

    def cold() -> None:  # a fresh process: nothing in memory, the stored text on disk
        clear_cache(stored=False)

    def api_context() -> None:
        assert client.get(f"{base}/context").status_code == 200

    return {
        "check (service)": median_ms(lambda: check(session), runs),
        "check (API)": median_ms(api_check, runs),
        "context cold (service)": median_ms(lambda: context_json(session), runs, cold),
        "context rebuilt (service)": median_ms(lambda: context_json(session), runs, clear_cache),
        "context warm (service)": median_ms(lambda: context_json(session), runs),
        "context_payload (dicts)": median_ms(lambda: context_payload(session), min(runs, 10)),
        "context cold (API)": median_ms(api_context, runs, cold),
        "context rebuilt (API)": median_ms(api_context, runs, clear_cache),
        "refresh (writer)": median_ms(changes.replace_entries, runs),
        "context after a change (API)": median_ms(api_context, runs, changes.elsewhere),
        "context warm (API)": median_ms(api_context, runs),
        "context after an append (API)": median_ms(api_context, runs, changes.append_one),
    }


class _Changes:
    """The writes timed around the context reads: one append, and entries replaced."""

    pair: Final[tuple[dict[str, Any], ...]] = (
        {"role": "user", "content": "Please continue with the next step of the task."},
        {"role": "assistant", "content": [{"type": "text", "text": "Done: tests pass."}]},
    )

    def __init__(self, session: Any) -> None:
        self.session = session
        self.appended = 0

    def append_one(self) -> None:
        from sessions_app.services.sessions.lifecycle import append_messages

        append_messages(self.session, [self.pair[self.appended % 2]])
        self.appended += 1

    def replace_entries(self) -> None:
        """What a compaction, revert or offload commits last (the revision bumped, the
        stored text refreshed once committed), timed in the writer."""
        from django.db import transaction

        from sessions_app.models import Session
        from sessions_app.services.compacting.writeback import save_entry_counters

        with transaction.atomic():
            locked = Session.objects.select_for_update().get(pk=self.session.pk)
            save_entry_counters(locked)

    def elsewhere(self) -> None:  # ... then read by another process of the same store
        from sessions_app.services.context.text import clear_cache

        self.replace_entries()
        clear_cache(stored=False)


def _append_rates(session: Any, client: Any, base: str, smoke: bool) -> dict[str, float]:
    """Appends per second: one message per call (service, API), 100 per API request."""
    from sessions_app.services.sessions.lifecycle import append_messages

    pair = list(_Changes.pair)
    count = 20 if smoke else 200
    rates: dict[str, float] = {}
    started = time.perf_counter()
    for index in range(count):
        append_messages(session, [pair[index % 2]])
    rates["appends/s (service)"] = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for index in range(count):
        response = client.post(
            f"{base}/messages", {"messages": [pair[index % 2]]}, content_type="application/json"
        )
        assert response.status_code == 201, response.content
    rates["appends/s (API)"] = count / (time.perf_counter() - started)
    batch = pair * 50
    requests = 2 if smoke else 20
    started = time.perf_counter()
    for _ in range(requests):
        response = client.post(
            f"{base}/messages", {"messages": batch}, content_type="application/json"
        )
        assert response.status_code == 201, response.content
    rates["appends/s (API, 100 per request)"] = (
        requests * len(batch) / (time.perf_counter() - started)
    )
    return rates


def _database_version(connection: Any) -> str:
    if connection.vendor == "postgresql":
        major, minor = divmod(connection.pg_version, 10000)
        return f"PostgreSQL {major}.{minor}"
    import sqlite3

    return f"SQLite {sqlite3.sqlite_version}"


def _run_child(database_url: str | None, data_dir: str, smoke: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CTXWEB_DATA_DIR=data_dir,
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        DJANGO_DEBUG="1",
        CTXWEB_CONN_MAX_AGE="60",  # persistent connections, as a deployment uses them
        PYTHONPATH=str(ROOT),
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    command = [sys.executable, "-m", "bench.api", "--child", *(["--smoke"] if smoke else [])]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise RuntimeError(f"bench.api child failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _format(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.1f} s"
    if unit == "/s":
        return f"{value:,.0f}"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def main(argv: Sequence[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if "--child" in argv:
        print(json.dumps(child("--smoke" in argv)))
        return
    args = options(__doc__, argv)
    sys.path.insert(0, str(ROOT))
    from tests.support import postgres

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-api-") as data_dir:
        log("api: SQLite")
        results["SQLite (WAL)"] = _run_child(None, data_dir, args.smoke)
        if not args.smoke and postgres.available(PG_SERVER):
            log("api: PostgreSQL")
            with postgres.throwaway_database(PG_SERVER, "ctxweb_bench_api") as url:
                results["PostgreSQL 127.0.0.1"] = _run_child(url, data_dir, args.smoke)
    names = list(results)
    print("## Web app API: `bench/api.py`\n")
    first = results[names[0]]
    print(
        f"A stored session of {first['session']} (after the appends), context response "
        f"{first['context bytes'] / 1e6:.1f} MB; median of {3 if args.smoke else RUNS} runs. "
        + "; ".join(f"{name}: {results[name]['database']}" for name in names)
        + ".\n"
    )
    rows = [[label, *(_format(results[n][key], unit) for n in names)] for label, key, unit in ROWS]
    print(table(["", *names], rows))
    print()
    _goals(results, args.smoke)


def _goals(results: dict[str, dict[str, Any]], smoke: bool) -> None:
    """The goal lines of every database, then PostgreSQL's own."""
    for name in results:
        figures = results[name]
        for key in ("check (API)", "context cold (API)", "context warm (API)"):
            print(goal(f"{name}: {key} = {figures[key]:.1f} ms (< 20 ms)", figures[key] < 20))
    if "PostgreSQL 127.0.0.1" in results:
        figures = results["PostgreSQL 127.0.0.1"]
        rebuilt = figures["context rebuilt (API)"]
        print(goal(f"PostgreSQL: GET /context rebuilt = {rebuilt:.1f} ms (< 20 ms)", rebuilt < 20))
        changed = figures["context after a change (API)"]
        print(
            goal(
                f"PostgreSQL: GET /context first read after a change = {changed:.1f} ms (< 20 ms)",
                changed < 20,
            )
        )
        print(
            goal(
                f"PostgreSQL: GET /context cold = {figures['context cold (API)']:.1f} ms (< 20 ms)",
                figures["context cold (API)"] < 20,
            )
        )
        print(
            goal(
                f"PostgreSQL: GET /context warm = {figures['context warm (API)']:.1f} ms (< 5 ms)",
                figures["context warm (API)"] < 5,
            )
        )
    else:
        print(f"- PostgreSQL: skipped ({'smoke run' if smoke else 'no server'})")


if __name__ == "__main__":
    main()
