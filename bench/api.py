"""Benchmark: the web app's check, context and append paths on a stored 1M-token session.

Goal (issue 4): `check` and `context` under 20 ms each, because token counts are cached per
message (a sum, not a re-encode); appends per second. Times the service functions and the
same calls through the REST API (Django test client, Bearer key), median of repeated runs
after a warm-up. `context` is timed cold (cache cleared before each run: the first read
after a compaction, revert or offload), warm (a repeated read) and right after an append
(the cached text extended by the new entry). Uses a throwaway SQLite database (or
DATABASE_URL when set).

Run: .venv/bin/python bench/api.py
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("CTXWEB_DATA_DIR", tempfile.mkdtemp(prefix="ctxweb-bench-api-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")
# Persistent connections, as a deployment uses them (one connection per request otherwise).
os.environ.setdefault("CTXWEB_CONN_MAX_AGE", "60")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from bench.tokens import synthetic_session  # noqa: E402
from sessions_app.models import ApiKey  # noqa: E402
from sessions_app.services.context import check, context_json, context_payload  # noqa: E402
from sessions_app.services.context_text import clear_cache  # noqa: E402
from sessions_app.services.sessions import append_messages, create_session  # noqa: E402

RUNS = 30


def median_ms(
    action: Callable[[], Any], runs: int = RUNS, before: Callable[[], Any] | None = None
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


def main() -> None:
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")
    _, key = ApiKey.issue(owner, "bench")
    messages = synthetic_session(5001, 1_000_000)
    started = time.perf_counter()
    session = create_session(owner, messages=messages, context_limit=2_000_000)
    stored_s = time.perf_counter() - started
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    base = f"/api/sessions/{session.pk}"

    def api_check() -> None:
        assert client.post(f"{base}/check", content_type="application/json").status_code == 200

    def api_context() -> None:
        assert client.get(f"{base}/context").status_code == 200

    pair: list[dict[str, Any]] = [
        {"role": "user", "content": "Please continue with the next step of the task."},
        {"role": "assistant", "content": [{"type": "text", "text": "Done: tests pass."}]},
    ]
    appended = [0]

    def append_one() -> None:
        append_messages(session, [pair[appended[0] % 2]])
        appended[0] += 1

    figures = {
        "check (service)": median_ms(lambda: check(session)),
        "check (API)": median_ms(api_check),
        "context_json cold (service)": median_ms(lambda: context_json(session), before=clear_cache),
        "context_json warm (service)": median_ms(lambda: context_json(session)),
        "context_payload (dicts)": median_ms(lambda: context_payload(session), runs=10),
        "context cold (API)": median_ms(api_context, before=clear_cache),
        "context warm (API)": median_ms(api_context),
        "context after an append (API)": median_ms(api_context, before=append_one),
    }
    size = len(client.get(f"{base}/context").content)

    count = 200
    started = time.perf_counter()
    for index in range(count):
        append_messages(session, [pair[index % 2]])
    service_rate = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for index in range(count):
        response = client.post(
            f"{base}/messages", {"messages": [pair[index % 2]]}, content_type="application/json"
        )
        assert response.status_code == 201, response.content
    api_rate = count / (time.perf_counter() - started)

    python = platform.python_version()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {python}")
    print(f"database: {connection.vendor}")
    print(
        f"session: {session.message_count} messages, {session.context_tokens:,} tokens "
        f"(stored in {stored_s:.1f} s)"
    )
    for name, value in figures.items():
        print(f"{name:<30} {value:8.2f} ms (median)")
    print(f"context response size: {size / 1e6:.1f} MB")
    print(f"{'appends (service)':<30} {service_rate:8.0f} /s (one message each)")
    print(f"{'appends (API)':<30} {api_rate:8.0f} /s (one message each)")


if __name__ == "__main__":
    main()
