"""Benchmark: full-text search over 1M stored messages (issue 28: `search_history`, the MCP
tool's and the list page's search, selectors/search.py), on SQLite (FTS5) and, when a
server answers on CTXWEB_BENCH_PG_URL, PostgreSQL (GIN full-text index).

In a throwaway database: SESSIONS sessions of one owner share the messages (another owner
holds a tenth more, which the searches must pass over); each message is about 30 words
drawn from a Zipf-like vocabulary (rank r drawn with weight 1/r), a third of them tool calls
or results. The rows go in with bulk inserts, so the database's own index is kept on every
insert (SQLite's triggers; PostgreSQL's generated column and GIN index), as for any writer;
PostgreSQL is then analyzed, as autovacuum would. Each query runs RUNS times through
`search_history(owner, query, limit=20)` (snippets and compaction numbers included) and
the median is reported: a word of one message, words from rare to one in most messages
(newest first: the time index is walked), two words, and one session's search. Results
are printed, never committed.

Run: .venv/bin/python -m bench.search [--messages 1000000] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import django_owner, goal, log, table  # noqa: E402

PG_SERVER = os.environ.get("CTXWEB_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432")
SESSIONS = 1000
RUNS = 20
BATCH = 5000
VOCABULARY = 20_000
WORDS = 30
GOAL_MS = 200
_SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en")]


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words, key=lambda w: (len(w), w))


def _content(rng: random.Random, words: list[str], weights: list[float], n: int) -> Any:
    text = " ".join(rng.choices(words, cum_weights=weights, k=WORDS))
    if n % 3 == 1:
        return [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": text}}]
    if n % 3 == 2:
        return [{"type": "tool_result", "tool_use_id": f"t{n - 1}", "content": text}]
    return text


def _fill(owner: Any, total: int) -> dict[str, Any]:
    """`total` messages over SESSIONS sessions of `owner` (and a tenth more of another
    owner's); the queries' words, by how many messages hold them."""
    from django.contrib.auth import get_user_model

    from sessions_app.models import Message, Session

    rng = random.Random(28)
    words = _vocabulary(rng)
    weights, running = [], 0.0
    for rank in range(1, len(words) + 1):
        running += 1 / rank
        weights.append(running)
    other = get_user_model().objects.create_user("other")
    sessions = Session.objects.bulk_create(
        Session(owner=owner if n < SESSIONS else other, title=f"bench session {n}")
        for n in range(SESSIONS + SESSIONS // 10)
    )
    per_session = max(1, total // SESSIONS)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[Message] = []
    stored = 0
    for index, session in enumerate(sessions):
        for seq in range(per_session):
            content = _content(rng, words, weights, seq)
            if index == SESSIONS // 2 and seq == per_session // 2:
                content = "the deploy key is quokkaseven " + str(content)
            at = start + timedelta(seconds=seq * SESSIONS + index)
            role = "assistant" if seq % 3 == 1 else "user"
            rows.append(
                Message(session=session, seq=seq, role=role, content=content, created_at=at)
            )
            if len(rows) == BATCH:
                Message.objects.bulk_create(rows)
                stored += len(rows)
                rows = []
                log(f"search: {stored:,} messages stored")
    Message.objects.bulk_create(rows)
    return {"words": words, "session": sessions[SESSIONS // 2], "stored": stored + len(rows)}


def _share(rank: int) -> float:
    """The share of messages holding the word of `rank` (0: the most drawn)."""
    harmonic = sum(1 / r for r in range(1, VOCABULARY + 1))
    return 1 - (1 - 1 / ((rank + 1) * harmonic)) ** WORDS


def _queries(words: list[str], session: Any) -> list[tuple[str, str, Any]]:
    """(label, query, session scope): words picked by how many messages hold them."""
    picked = [
        (f"a word in {_share(rank):.2%} of messages", words[rank], None)
        for rank in (15_000, 500, 50, 2)
    ]
    return [
        ("a word of one message", "quokkaseven", None),
        *picked,
        (f"two words ({_share(50):.1%} and {_share(60):.1%})", f"{words[50]} {words[60]}", None),
        (f"one session, a word in {_share(2):.0%}", words[2], session),
    ]


def child(total: int, runs: int) -> dict[str, Any]:
    owner = django_owner("ctxweb-bench-search-")
    from django.db import connection

    from sessions_app.selectors.search import search_history

    started = time.perf_counter()
    filled = _fill(owner, total)
    fill_seconds = time.perf_counter() - started
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does after a bulk load
    results = []
    for label, query, session in _queries(filled["words"], filled["session"]):
        hits = search_history(owner, query, session=session, limit=20)  # warm
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            search_history(owner, query, session=session, limit=20)
            times.append(time.perf_counter() - started)
        results.append({"label": label, "ms": statistics.median(times) * 1000, "hits": len(hits)})
    return {
        "database": connection.vendor,
        "messages": filled["stored"],
        "fill_seconds": fill_seconds,
        "queries": results,
    }


def _run_child(database_url: str | None, total: int, runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="ctxweb.settings", PYTHONPATH=str(ROOT))
    if database_url:
        env["DATABASE_URL"] = database_url
    command = [sys.executable, "-m", "bench.search", "--child", str(total), str(runs)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"bench.search child failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--smoke", action="store_true", help="2,000 messages, 2 runs")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    total, runs = (2_000, 2) if args.smoke else (args.messages, RUNS)
    from tests.support import postgres

    results = {"SQLite (FTS5)": _run_child(None, total, runs)}
    if not args.smoke and postgres.available(PG_SERVER):
        with postgres.throwaway_database(PG_SERVER, "ctxweb_bench_search") as url:
            results["PostgreSQL (GIN)"] = _run_child(url, total, runs)
    _report(results, total, runs, args.smoke)


def _report(results: dict[str, dict[str, Any]], total: int, runs: int, smoke: bool) -> None:
    names = list(results)
    first = results[names[0]]
    print("## Full-text search: `bench/search.py`\n")
    print(
        f"`search_history(owner, query, limit=20)` over {first['messages']:,} stored messages "
        f"({SESSIONS} sessions, and a tenth more of another owner); median of {runs} runs "
        "(hits in brackets). Stored with bulk inserts in "
        + ", ".join(f"{name}: {results[name]['fill_seconds']:.0f} s" for name in names)
        + ".\n"
    )
    rows = [
        [query["label"], *(_cell(results[name]["queries"][i]) for name in names)]
        for i, query in enumerate(first["queries"])
    ]
    print(table(["query", *names], rows))
    print()
    for name in names:
        worst = max(q["ms"] for q in results[name]["queries"])
        print(
            goal(
                f"{name}: every query under {GOAL_MS} ms over {total:,} messages ({worst:.0f} ms)",
                worst < GOAL_MS,
            )
        )
    if len(names) == 1:
        print(f"- PostgreSQL: skipped ({'smoke run' if smoke else 'no server'})")


def _cell(query: dict[str, Any]) -> str:
    return f"{query['ms']:.1f} ms ({query['hits']})"


if __name__ == "__main__":
    main()
