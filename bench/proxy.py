"""Benchmark: the transparent proxy's own cost (issue 12).

- Added latency per request, no compaction (the profile's window is far above the history),
  on a conversation of 10K and of 200K tokens: each request is the previous one plus the
  answer and a new user message, as an agent sends it. ctxweb runs as deployed: gunicorn
  with its production settings (ctxweb/gunicorn.conf.py, the ASGI worker) in processes of
  its own; the fake upstream and the clients run in this script's process. Each proxied
  request is interleaved with the same body sent straight to the fake, and the added
  latency is the difference of the medians. Every request carries a coding agent's
  unchanged system prompt and tool definitions (~73 KB), as Claude Code sends them. Goal:
  p50 under 15 ms at 200K (stored messages are never re-encoded: their counts are cached;
  only the new messages are counted; an unchanged system prompt and tools are neither
  written nor counted again).
- The same for the OpenAI Responses route (`/proxy/openai/v1/responses`, issue 25): the
  history as `input` items after a developer message, the tools as function tools, each
  answer's output items sent back; same goal.
- Time to first byte of a streamed answer through the proxy and straight from the fake
  (which pauses between events), median of several requests.
- 20 concurrent streaming clients, each its own conversation: wall time, requests per
  second, per-request p50 and p95, errors.
- The proxy's own work per request at 200K without HTTP (read the body, map, append, plan,
  record the answer), in this process before any server starts: CPU time (blind to the
  machine's other load, which the wall times above are not) and database queries.

A child process with a throwaway SQLite database (WAL) and production settings (DEBUG off)
sets up the database, measures the proxy's own work, then starts gunicorn on it.
Run: .venv/bin/python -m bench.proxy [--smoke]
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.common import goal, log, options, table
from bench.proxy_responses import measured_responses, responses_goal

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 15.0
#: gunicorn workers serving ctxweb (one per core of the machine bench/results.md names).
SERVER_WORKERS = 2


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _agent_overhead() -> tuple[str, list[dict[str, Any]]]:
    """A coding agent's system prompt (~14 KB) and tool definitions (~60 KB), as Claude Code
    sends with every request: the same bytes each time."""
    system = "You are a careful coding agent working in the user's repository. " * 220
    tools = [
        {
            "name": f"tool_{number}",
            "description": f"Tool {number}: reads, edits or runs something for the agent. " * 40,
            "input_schema": {
                "type": "object",
                "properties": {
                    f"argument_{a}": {"type": "string", "description": "An argument. " * 8}
                    for a in range(4)
                },
                "required": ["argument_0"],
            },
        }
        for number in range(20)
    ]
    return system, tools


_SYSTEM, _TOOLS = _agent_overhead()


class _Conversation:
    """An agent's conversation: the history grows by the answer and a new user message.
    Every request carries the agent's unchanged system prompt and tool definitions."""

    def __init__(self, history: list[Any]) -> None:
        self.history = history
        self.turn = 0

    def body(self, *, stream: bool = False) -> bytes:
        payload = {
            "model": "bench",
            "max_tokens": 64,
            "system": _SYSTEM,
            "tools": _TOOLS,
            "messages": self.history,
            "stream": stream,
        }
        return json.dumps(payload).encode()

    def advance(self, answer: Any) -> None:
        self.turn += 1
        self.history = [
            *self.history,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": f"Carry on with step {self.turn}."},
        ]


def _added_latency(
    http: Any, proxy: str, direct: str, history: list[Any], runs: int
) -> dict[str, Any]:
    """Medians (ms) of requests through the proxy and straight to the fake, interleaved."""
    conversation = _Conversation(history)
    headers = {"content-type": "application/json", "x-api-key": http.headers["x-api-key"]}
    first = http.post(proxy, content=conversation.body(), headers=headers)  # stores it all
    assert first.status_code == 200, first.text
    conversation.advance(first.json()["content"])
    through, straight = [], []
    for _ in range(runs):
        body = conversation.body()
        started = time.perf_counter()
        response = http.post(direct, content=body, headers=headers)
        straight.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
        started = time.perf_counter()
        response = http.post(proxy, content=body, headers=headers)
        through.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
        conversation.advance(response.json()["content"])
    return {
        "proxy p50": statistics.median(through),
        "direct p50": statistics.median(straight),
        "added p50": statistics.median(through) - statistics.median(straight),
        "added p95": _percentile(through, 0.95) - _percentile(straight, 0.95),
        "bytes": len(conversation.body()),
    }


def _first_byte(http: Any, url: str, body: bytes, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    elapsed: float | None = None
    with http.stream("POST", url, content=body, headers=headers) as response:
        for chunk in response.iter_raw():
            if chunk and elapsed is None:
                elapsed = (time.perf_counter() - started) * 1000
    if elapsed is None:
        raise RuntimeError("no byte came")
    return elapsed


def _ttfb(http: Any, proxy: str, direct: str, history: list[Any], runs: int) -> dict[str, Any]:
    conversation = _Conversation(history)
    headers = {"content-type": "application/json", "x-api-key": http.headers["x-api-key"]}
    through, straight = [], []
    for _ in range(runs):
        body = conversation.body(stream=True)
        straight.append(_first_byte(http, direct, body, headers))
        through.append(_first_byte(http, proxy, body, headers))
        conversation.advance([{"type": "text", "text": "fake summary"}])
    return {"proxy": statistics.median(through), "direct": statistics.median(straight)}


def _concurrent(proxy: str, key: str, clients: int, requests: int) -> dict[str, Any]:
    import httpx

    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        opening = f"Concurrent client {number}: " + "please work on the task. " * 50
        conversation = _Conversation([{"role": "user", "content": opening}])
        headers = {"content-type": "application/json", "x-api-key": key}
        with httpx.Client(timeout=60) as http:
            for _ in range(requests):
                started = time.perf_counter()
                try:
                    with http.stream(
                        "POST", proxy, content=conversation.body(stream=True), headers=headers
                    ) as response:
                        for _ in response.iter_raw():
                            pass
                        ok = response.status_code == 200
                except httpx.HTTPError as error:
                    ok, response = False, None
                    with lock:
                        errors.append(f"{type(error).__name__}: {error}")
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    times.append(elapsed)
                    if not ok and response is not None:
                        errors.append(f"HTTP {response.status_code}")
                conversation.advance([{"type": "text", "text": "fake summary"}])

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {
        "wall s": wall,
        "requests": len(times),
        "per s": len(times) / wall,
        "p50": statistics.median(times),
        "p95": _percentile(times, 0.95),
        "errors": len(errors),
        "error kinds": sorted(set(errors)),
    }


def _server_work(owner: Any, history: list[Any], runs: int) -> dict[str, Any]:
    """CPU and wall ms (p50) and queries of the proxy's work per request, no HTTP."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.proxy.anthropic import AnthropicAdapter
    from sessions_app.proxy.digests import decode_body, digest
    from sessions_app.proxy.mapping import proxy_request
    from sessions_app.services.proxying.turns import plan_request, record_answer

    adapter, conversation = AnthropicAdapter(), _Conversation(history)
    cpu, wall, queries = [], [], []
    for turn in range(runs + 1):  # the first request stores the whole history: not counted
        body = conversation.body()
        content = [{"type": "text", "text": f"answer {turn}"}]
        reply = {"type": "message", "content": content, "usage": {"input_tokens": 9}}
        with CaptureQueriesContext(connection) as captured:
            started, clock = time.process_time(), time.perf_counter()
            decoded, hashes = decode_body(body)
            request = proxy_request(adapter, adapter.conversation(decoded), name="", raw=hashes)
            plan = plan_request(owner, request)
            answer = adapter.answer(reply)
            assert plan is not None
            assert answer is not None
            record_answer(
                plan.session_id,
                plan.stored,
                answer.canonical,
                digest(answer.client),
                profile=plan.profile,
            )
            spent, elapsed = time.process_time() - started, time.perf_counter() - clock
        if turn:
            cpu.append(spent * 1000)
            wall.append(elapsed * 1000)
            queries.append(len(captured))
        conversation.advance(content)
    return {
        "cpu p50": statistics.median(cpu),
        "wall p50": statistics.median(wall),
        "queries": statistics.median(queries),
    }


def child(smoke: bool) -> dict[str, Any]:
    """Run in the child process (Django set up on a throwaway SQLite database)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sessions_app.models import ApiKey, CompactionProfile, Session

    call_command("migrate", verbosity=0)
    CompactionProfile.objects.update(is_default=False)
    CompactionProfile.objects.create(name="bench-wide", is_default=True, context_limit=5_000_000)
    owner = get_user_model().objects.create_user("bench")
    _, key = ApiKey.issue(owner, "bench")
    sizes = {"10K": (41, 10_000), "200K": (801, 200_000)}
    if smoke:
        sizes = {"2K": (11, 2_000), "10K": (41, 10_000)}
    runs = 3 if smoke else 30
    figures: dict[str, Any] = {"sizes": {}}
    log("proxy: its own work per request (no HTTP)")
    figures["work"] = _server_work(owner, _history(*list(sizes.values())[-1]), runs)
    histories = {label: _history(*size) for label, size in sizes.items()}
    # The histories stay in memory to the end: the collector need not scan them again and
    # again while requests are timed (its pauses are this script's, not the proxy's).
    gc.collect()
    gc.freeze()
    with _served() as (fake, responses, url):
        figures.update(_measured(fake, url, key, histories, runs, smoke))
        figures["responses"] = measured_responses(
            responses, url, key, histories, runs, (_SYSTEM, _TOOLS)
        )
    figures["sessions"] = Session.objects.count()
    return figures


def _history(count: int, tokens: int) -> list[Any]:
    from bench.histories import synthetic_session

    history = synthetic_session(count, tokens)
    if history[-1]["role"] != "user":
        history.append({"role": "user", "content": "Go on."})
    return history


@contextlib.contextmanager
def _served() -> Iterator[tuple[Any, Any, str]]:
    """The fake upstreams (Anthropic, Responses: in this process) and ctxweb under gunicorn
    with its production settings (ctxweb/gunicorn.conf.py: the ASGI worker), on this
    process's database."""
    from django.conf import settings

    from bench.servers import free_port, processes, server_env, wait_until_up
    from tests.sessions_app.proxy.responses_fake import FakeResponses
    from tests.support.fake_streaming import StreamingAnthropic

    data_dir = Path(os.environ["CTXWEB_DATA_DIR"])
    database = f"sqlite:///{settings.DATABASES['default']['NAME']}"
    port = free_port()
    with StreamingAnthropic() as fake, FakeResponses() as responses:
        env = server_env(
            data_dir,
            database,
            port,
            SERVER_WORKERS,
            CTXWEB_UPSTREAM_ANTHROPIC_URL=fake.base_url,
            CTXWEB_UPSTREAM_OPENAI_URL=responses.base_url,
        )
        with processes(env, data_dir, worker=False):
            wait_until_up(port)
            yield fake, responses, f"http://127.0.0.1:{port}"


def _measured(
    fake: Any, url: str, key: str, histories: dict[str, list[Any]], runs: int, smoke: bool
) -> dict[str, Any]:
    """Added latency at each size, time to first byte, concurrent streaming clients."""
    import httpx

    proxy, direct = f"{url}/proxy/anthropic/v1/messages", f"{fake.base_url}/v1/messages"
    figures: dict[str, Any] = {"sizes": {}}
    with httpx.Client(timeout=120, headers={"x-api-key": key}) as http:
        for label, history in histories.items():
            log(f"proxy: added latency at {label} tokens")
            figures["sizes"][label] = _added_latency(http, proxy, direct, history, runs)
            fake.reset()
        log("proxy: time to first byte")
        fake.event_delay = 0.02
        figures["ttfb"] = _ttfb(http, proxy, direct, _history(41, 10_000), runs)
        fake.reset()
    log("proxy: 20 concurrent streaming clients")
    fake.event_delay = 0.005
    figures["concurrent"] = _concurrent(proxy, key, 20, 2 if smoke else 10)
    return figures


def _run_child(data_dir: str, smoke: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CTXWEB_DATA_DIR=data_dir,
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        # Production settings, as bench/load.py runs them: with DEBUG on, every query is
        # also kept and logged, a cost no deployment pays.
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SECURE_SSL_REDIRECT="0",
        CTXWEB_LOG_LEVEL="WARNING",
        CTXWEB_CONN_MAX_AGE="60",
        PYTHONPATH=str(ROOT),
    )
    command = [sys.executable, "-m", "bench.proxy", "--child", *(["--smoke"] if smoke else [])]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"bench.proxy child failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _size_rows(sizes: dict[str, dict[str, float]]) -> list[list[object]]:
    """One row per history size: the request, direct and proxied p50, the added latency."""
    return [
        [
            label,
            f"{size['bytes'] / 1e6:.2f} MB",
            f"{size['direct p50']:.1f} ms",
            f"{size['proxy p50']:.1f} ms",
            f"{size['added p50']:.1f} ms",
            f"{size['added p95']:.1f} ms",
        ]
        for label, size in sizes.items()
    ]


def main(argv: Sequence[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if "--child" in argv:
        print(json.dumps(child("--smoke" in argv)))
        return
    args = options(__doc__, argv)
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-proxy-") as data_dir:
        figures = _run_child(data_dir, args.smoke)
    print("## The transparent proxy: `bench/proxy.py`\n")
    print(
        f"ctxweb under gunicorn (ctxweb/gunicorn.conf.py: the ASGI worker, {SERVER_WORKERS} "
        "workers) in its own processes, SQLite (WAL); the fake upstream and the clients in "
        "the benchmark's process.\n"
    )
    headers = ["history", "request", "direct p50", "proxy p50", "added p50", "added p95"]
    print(table(headers, _size_rows(figures["sizes"])))
    print("\nThe OpenAI Responses route (`/proxy/openai/v1/responses`), the same histories:\n")
    print(table(headers, _size_rows(figures["responses"])))
    ttfb, many = figures["ttfb"], figures["concurrent"]
    print()
    print(
        f"Time to first byte (streamed, 10K history): direct {ttfb['direct']:.1f} ms, "
        f"through the proxy {ttfb['proxy']:.1f} ms.\n"
    )
    print(
        f"20 concurrent streaming clients: {many['requests']} requests in {many['wall s']:.1f} s "
        f"({many['per s']:.1f}/s), p50 {many['p50']:.0f} ms, p95 {many['p95']:.0f} ms, "
        f"{many['errors']} errors; {figures['sessions']} sessions stored.\n"
    )
    if many["error kinds"]:
        print(f"Errors: {'; '.join(many['error kinds'])}.\n")
    largest = list(figures["sizes"])[-1]
    work = figures["work"]
    print(
        f"The proxy's own work per request at {largest} (read, map, append, plan, record the "
        f"answer; in process, no HTTP): CPU p50 {work['cpu p50']:.1f} ms, wall p50 "
        f"{work['wall p50']:.1f} ms, {work['queries']:.0f} database queries.\n"
    )
    added = figures["sizes"][largest]["added p50"]
    print(
        goal(
            f"added latency p50 at {largest} = {added:.1f} ms (< {GOAL_MS:.0f} ms)", added < GOAL_MS
        )
    )
    print(responses_goal(figures["responses"], largest, GOAL_MS))
    print(goal(f"20 concurrent streaming clients: {many['errors']} errors", many["errors"] == 0))


if __name__ == "__main__":
    main()
