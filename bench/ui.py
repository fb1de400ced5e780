"""Benchmark: the session page of a 10,000-message session with 20 compaction points.

Builds the session through the services (appends of 500 messages, each followed by a manual
compaction with an instant scripted summarizer, so the 20 compactions nest: each one
re-summarizes the previous summary), then times the pages in-process through Django's test
client (middleware, templates and queries included; no network): the session page, its tabs,
the marker expanders and the sessions list. Prints the median server time, cold (view-model
cache emptied: the first view after a change) and warm, and the HTML size.

Goal (issue 6): the session page under 300 ms and under 500 KB.

Run: .venv/bin/python -m bench.ui [--messages 10000] [--compactions 20] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["CTXWEB_DATA_DIR"] = tempfile.mkdtemp(prefix="ctxweb-bench-ui-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from bench.common import goal, table  # noqa: E402
from compaction import ScriptedSummarizer  # noqa: E402
from sessions_app.models import Compaction, CompactionProfile, Session  # noqa: E402
from sessions_app.services.compacting.session_compaction import compact_session  # noqa: E402
from sessions_app.services.sessions.lifecycle import append_messages, create_session  # noqa: E402
from tests.support.histories import synthetic_history  # noqa: E402

RUNS = 7
GOAL_MS = 300
GOAL_KB = 500


def build(messages: int, compactions: int) -> Session:
    """The session: `compactions` rounds of appends, each followed by a compaction."""
    owner = get_user_model().objects.create_user("bench", password="bench-password-123")
    profile = CompactionProfile.objects.create(
        name="bench-ui",
        context_limit=200_000,
        tail_retention_ratio=0.01,
        keep_recent_messages=10,
        steps=["summary"],
        summarizer="extractive",
        retry_backoff_seconds=0.0,
    )
    history = synthetic_history(messages, words_per_message=30, seed=7)
    session = create_session(
        owner, title="bench: 10k messages", messages=history[:1], profile=profile
    )
    step = (len(history) - 1) // compactions
    summary = "Goals and key decisions: keep going. Files: src/module_1.py. " * 20
    start = 1
    for index in range(compactions):
        end = len(history) if index == compactions - 1 else start + step
        # Cut before a user request, so no append splits a tool call from its result.
        while end < len(history) and not (
            history[end]["role"] == "user" and isinstance(history[end]["content"], str)
        ):
            end += 1
        append_messages(session, history[start:end])
        start = end
        outcome = compact_session(
            session, profile=profile, summarizer=ScriptedSummarizer(default=summary)
        )
        if outcome.compaction is None:
            raise SystemExit(f"compaction {index + 1} did not happen: {outcome.reason}")
    session.refresh_from_db()
    return session


def build_flat(owner: Any, messages: int, compactions: int) -> Session:
    """An imported-style session: `compactions` disjoint compaction points, none nested.

    Importers record a transcript's own compactions like this (one per compact boundary),
    so every marker sits at the top level: the worst case for the top-level window.
    """
    history = synthetic_history(messages, words_per_message=30, seed=8)
    session = create_session(owner, title="bench: flat imported compactions", messages=history)
    rows = list(session.messages.order_by("seq").values_list("seq", "token_count", "created_at"))
    span = len(rows) // (compactions + 1)
    for number in range(1, compactions + 1):
        first, last = (number - 1) * span + 1, number * span - 10
        Compaction.objects.create(
            session=session,
            number=number,
            created_at=rows[last][2],
            trigger=Compaction.Trigger.IMPORTED,
            summarizer="imported",
            first_seq=first,
            last_seq=last,
            summary=f"Imported summary {number}.",
            tokens_before=sum(t for _, t, _ in rows[: last + 1]),
            tokens_after=500,
            messages_before=last + 1,
            messages_after=12,
        )
    session.compaction_count = compactions
    session.save(update_fields=["compaction_count"])
    return session


def timed(client: Client, path: str, *, cold: bool, **headers: Any) -> tuple[float, int]:
    """Median milliseconds and the body size of GET `path` (after one warm-up).

    cold: the view-model cache is emptied before each request (the first view after a change).
    """
    response = client.get(path, **headers)
    assert response.status_code == 200, (path, response.status_code)
    times = []
    for _ in range(RUNS):
        if cold:
            cache.clear()
        started = time.perf_counter()
        response = client.get(path, **headers)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), len(response.content)


def main(argv: list[str] | None = None) -> None:
    global RUNS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--compactions", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="300 messages, 3 compactions")
    args = parser.parse_args(argv)
    if args.smoke:
        args.messages, args.compactions, RUNS = 300, 3, 1
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    session = build(args.messages, args.compactions)
    built = time.perf_counter() - started
    client = Client()
    client.force_login(session.owner)
    rows = measure(client, "nested", _nested_pages(session))
    flat = build_flat(session.owner, args.messages, args.compactions)
    flat_base = f"/sessions/{flat.pk}/"
    middle = max(1, args.compactions // 2)
    rows += measure(
        client,
        "imported-style",
        [
            ("session page (full)", flat_base, {}),
            ("now vs before tab (htmx)", f"{flat_base}tabs/compare/", HTMX),
            (f"marker #{middle} originals", f"{flat_base}compactions/{middle}/originals/", HTMX),
        ],
    )
    print("## Session page: `bench/ui.py`\n")
    print(
        f"Nested: {session.message_count:,} messages, {session.compaction_count} nested "
        f"compactions, {session.history_tokens:,} history tokens (built in {built:.0f} s); "
        f"imported-style: {flat.message_count:,} messages, {args.compactions} disjoint markers. "
        f"SQLite, DEBUG={os.environ['DJANGO_DEBUG']}; median of {RUNS} requests.\n"
    )
    print(table(["session", "page", "cold ms", "warm ms", "KB"], rows))
    print()
    for label, page, cold, _, kilobytes in rows:
        if page == "session page (full)":
            print(
                goal(
                    f"{label} session page cold = {cold} ms, {kilobytes} KB "
                    f"(< {GOAL_MS} ms, < {GOAL_KB} KB)",
                    float(cold) < GOAL_MS and float(kilobytes) < GOAL_KB,
                )
            )


HTMX = {"HTTP_HX_REQUEST": "true"}


def _nested_pages(session: Any) -> list[tuple[str, str, dict[str, str]]]:
    """The nested session's pages: the page, its tabs, the newest and oldest markers."""
    base = f"/sessions/{session.pk}/"
    newest = session.compactions.order_by("-number").first()
    oldest = session.compactions.order_by("number").first()
    assert newest is not None
    assert oldest is not None
    return [
        ("session page (full)", base, {}),
        ("history tab (htmx)", f"{base}tabs/history/", HTMX),
        ("now vs before tab (htmx)", f"{base}tabs/compare/", HTMX),
        ("runtime context tab (htmx)", f"{base}tabs/context/", HTMX),
        ("compaction log tab (htmx)", f"{base}tabs/log/", HTMX),
        (
            f"marker #{newest.number} originals",
            f"{base}compactions/{newest.number}/originals/",
            HTMX,
        ),
        (
            f"marker #{oldest.number} originals",
            f"{base}compactions/{oldest.number}/originals/",
            HTMX,
        ),
        (f"marker #{newest.number} summary", f"{base}compactions/{newest.number}/summary/", HTMX),
        ("sessions list", "/", {}),
    ]


def measure(
    client: Client, label: str, pages: list[tuple[str, str, dict[str, str]]]
) -> list[list[str]]:
    """Each page timed cold and warm: table rows."""
    rows = []
    for page, path, headers in pages:
        cold, size = timed(client, path, cold=True, **headers)
        warm, _ = timed(client, path, cold=False, **headers)
        rows.append([label, page, f"{cold:.1f}", f"{warm:.1f}", f"{size / 1024:.1f}"])
    return rows


if __name__ == "__main__":
    main()
