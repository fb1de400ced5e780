"""Benchmark: never blocked (issue 26, "Measure"; docs/behaviour.md#prepared-compaction).

- The request that crosses the threshold, with a summary model that takes 3 s (an
  OpenAI-compatible summarizer configuration, the local fake answering after 3 s): for each
  of 10 conversations through the proxy, every request sent while the stored session stands
  at or over its threshold (its pre-call check acts: applies a prepared compaction, or
  forwards uncompacted while one is prepared, or compacts in the request over the hard
  limit) is timed; its added latency is its time minus the median time of the requests
  below the threshold of the same run. Goal: p99 under 100 ms (a request that waited for the
  summary model would add about 3 s). The conversation's model answers after a pause (an
  agent's turn), so a compaction prepared past `prepare_at` can be ready when needed.
- A conversation of 40 turns whose upstream window is smaller than the session believes:
  the fake upstream refuses a request over its window as Anthropic does (400 `prompt is too
  long`); ctxweb is to compact harder and retry (overflow recovery). Goal: 40 of 40 answered.

ctxweb runs as deployed: gunicorn (ctxweb/gunicorn.conf.py) and one `manage.py db_worker`,
in processes of their own, on a throwaway SQLite database with production settings; the fake
upstream, the fake summary model and the agents run in a child process of this script.
Run: .venv/bin/python -m bench.never_blocked [--smoke]
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.common import goal, log, options, table

ROOT = Path(__file__).resolve().parent.parent
GOAL_ADDED_MS = 100.0
#: The profile of the crossing conversations: its window, and the words of each user turn.
CROSSING_LIMIT = 8000
#: The overflow conversation: what the session believes, and the window the upstream has.
BELIEVED_LIMIT = 40_000
UPSTREAM_WINDOW = 9000
OVERFLOW_TURNS = 40


@dataclass(frozen=True)
class Sizes:
    """How big a run is: full, or tiny for `make bench-smoke`."""

    conversations: int = 10
    summary_seconds: float = 3.0
    answer_seconds: float = 1.5
    turns: int = 30
    overflow_turns: int = OVERFLOW_TURNS
    #: Words of each user turn (a word is about four tokens), and of a crossing
    #: conversation's opening message (about three quarters of its window: the turns far
    #: below the threshold are skipped).
    crossing_words: int = 60
    opening_words: int = 1200
    overflow_words: int = 250


SMOKE = Sizes(
    conversations=1,
    summary_seconds=0.3,
    answer_seconds=0.2,
    turns=12,
    overflow_turns=8,
    crossing_words=250,
    opening_words=1000,
    overflow_words=600,
)


def _windowed_upstream(answer_seconds: float) -> Any:
    """The conversation's fake Anthropic API: it answers after `answer_seconds`, and
    refuses a request whose size (bytes / 4, its token estimate) passes `window`."""
    from tests.support.fake_anthropic import Reply
    from tests.support.fake_streaming import StreamingAnthropic

    class Windowed(StreamingAnthropic):
        window: int | None = None
        refused = 0

        def _take(self, request: Any) -> Any:
            reply = super()._take(request)
            tokens = len(json.dumps(request.body)) // 4
            if self.window is not None and tokens > self.window:
                self.refused += 1
                message = f"prompt is too long: {tokens} tokens > {self.window} maximum"
                return Reply.error(400, "invalid_request_error", message)
            return reply

    return Windowed(default=replace(Reply.text("Done; next?"), delay=answer_seconds))


def _profiles(summary_url: str) -> None:
    """The crossing profile (a slow OpenAI-compatible summary model, compactions prepared
    past 80%) and the overflow profile (a window larger than the upstream's)."""
    from sessions_app.models import CompactionProfile, SummarizerConfig

    slow = SummarizerConfig.objects.create(
        name="slow", provider="openai", model="slow-summary", base_url=summary_url
    )
    CompactionProfile.objects.update(is_default=False)
    CompactionProfile.objects.create(
        name="bench-crossing",
        context_limit=CROSSING_LIMIT,
        keep_recent_messages=4,
        summarizer_config=slow,
        prepare_at=0.8,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )
    CompactionProfile.objects.create(
        name="bench-overflow",
        context_limit=BELIEVED_LIMIT,
        keep_recent_messages=4,
        summarizer="extractive",
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )


def _use_profile(name: str) -> None:
    from sessions_app.models import CompactionProfile

    CompactionProfile.objects.update(is_default=False)
    CompactionProfile.objects.filter(name=name).update(is_default=True)


class _Agent:
    """One conversation through the proxy: the history grows by the answer and a new user
    message of `words` words; each request names its session (X-Ctxweb-Session)."""

    def __init__(self, http: Any, url: str, name: str, words: int, opening: int = 0) -> None:
        self.http, self.url, self.name, self.words = http, url, name, words
        self.opening = opening or words
        self.history: list[dict[str, Any]] = []
        self.turn = 0

    def send(self) -> tuple[int, float]:
        """One request with a new user message: its status and milliseconds."""
        self.turn += 1
        words = self.opening if self.turn == 1 else self.words
        text = " ".join(f"step{self.turn}word{n}" for n in range(words))
        self.history.append({"role": "user", "content": f"Turn {self.turn}: {text}"})
        body = {"model": "bench", "max_tokens": 64, "messages": self.history}
        started = time.perf_counter()
        response = self.http.post(self.url, json=body, headers={"X-Ctxweb-Session": self.name})
        millis = (time.perf_counter() - started) * 1000
        if response.status_code == 200:
            self.history.append({"role": "assistant", "content": response.json()["content"]})
        else:  # not answered: the turn is dropped, as an agent would retry it
            self.history.pop()
        return response.status_code, millis


def _session(name: str) -> Any:
    from sessions_app.models import Session

    return Session.objects.filter(proxy_key=f"name:{name}").first()


def _standing(name: str) -> tuple[bool, int]:
    """Whether the stored session stands at or over its threshold, and how many
    compactions it has stored."""
    from sessions_app.services.sessions.threshold import session_standing

    session = _session(name)
    if session is None:
        return False, 0
    return session_standing(session).over_threshold, session.compaction_count


def _crossings(http: Any, url: str, sizes: Sizes) -> dict[str, Any]:
    """Each conversation until its threshold was crossed and a compaction applied: the
    times of the requests at the threshold (the one during which the compaction was
    applied, and any that left the session over it) and of the others."""
    _use_profile("bench-crossing")
    at_threshold: list[float] = []
    below: list[float] = []
    statuses: list[int] = []
    applied: list[str] = []
    for number in range(sizes.conversations):
        log(f"never_blocked: crossing conversation {number + 1} of {sizes.conversations}")
        name, words = f"crossing-{number}", sizes.crossing_words
        agent = _Agent(http, url, name, words=words, opening=sizes.opening_words)
        for _ in range(sizes.turns):
            before = _standing(agent.name)[1]
            status, millis = agent.send()
            statuses.append(status)
            over, after = _standing(agent.name)
            (at_threshold if over or after > before else below).append(millis)
            if after > before:
                applied.append(_how_applied(agent.name))
                break  # a compaction was applied: the threshold is crossed
    return {
        "at": at_threshold,
        "below": below,
        "errors": sum(s != 200 for s in statuses),
        "applied": {how: applied.count(how) for how in sorted(set(applied))},
    }


def _how_applied(name: str) -> str:
    """How the session's latest compaction came: prepared ahead of time, or written in the
    request (which waited for the summary model)."""
    from sessions_app.models import Compaction

    latest = Compaction.objects.filter(session=_session(name)).order_by("-number").first()
    if latest is None:
        return "none"
    return "prepared ahead" if getattr(latest, "prepared_at", None) else "in the request"


def _overflow(http: Any, url: str, upstream: Any, sizes: Sizes) -> dict[str, Any]:
    """The conversation whose upstream window is smaller than the session believes."""
    from sessions_app.models import Compaction

    _use_profile("bench-overflow")
    upstream.window, upstream.refused = UPSTREAM_WINDOW, 0
    agent = _Agent(http, url, "overflow", words=sizes.overflow_words)
    answered = 0
    for turn in range(sizes.overflow_turns):
        if turn % 10 == 0:
            log(f"never_blocked: overflow turn {turn + 1} of {sizes.overflow_turns}")
        answered += agent.send()[0] == 200
    upstream.window = None
    session = _session(agent.name)
    overflows = Compaction.objects.filter(session=session, trigger="overflow").count()
    return {
        "turns": sizes.overflow_turns,
        "answered": answered,
        "refused": upstream.refused,
        "overflow compactions": overflows,
        "learned window": getattr(session, "upstream_window", None),
    }


@contextlib.contextmanager
def _served(sizes: Sizes) -> Iterator[tuple[Any, str]]:
    """The fake summary model and upstream (in this process), then ctxweb under gunicorn
    and one db_worker on this process's database; the upstream and the proxy's URL."""
    from django.conf import settings

    from bench.servers import free_port, processes, server_env, wait_until_up
    from tests.support.fake_openai import ChatReply, FakeOpenAI

    data_dir = Path(os.environ["CTXWEB_DATA_DIR"])
    database = f"sqlite:///{settings.DATABASES['default']['NAME']}"
    port = free_port()
    slow = replace(
        ChatReply.text("Goals and key decisions:\n- carry on"), delay=sizes.summary_seconds
    )
    with FakeOpenAI(default=slow) as model, _windowed_upstream(sizes.answer_seconds) as fake:
        _profiles(model.base_url)
        env = server_env(data_dir, database, port, 2, CTXWEB_UPSTREAM_ANTHROPIC_URL=fake.base_url)
        with processes(env, data_dir, worker=True):
            wait_until_up(port)
            yield fake, f"http://127.0.0.1:{port}/proxy/anthropic/v1/messages"


def child(smoke: bool) -> dict[str, Any]:
    """Run in the child process (Django set up on a throwaway SQLite database)."""
    import django

    django.setup()
    import httpx
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sessions_app.models import ApiKey

    sizes = SMOKE if smoke else Sizes()
    call_command("migrate", verbosity=0)
    _, key = ApiKey.issue(get_user_model().objects.create_user("bench"), "bench")
    with (
        _served(sizes) as (upstream, url),
        httpx.Client(timeout=120, headers={"x-api-key": key}) as http,
    ):
        crossing = _crossings(http, url, sizes)
        overflow = _overflow(http, url, upstream, sizes)
    return {"sizes": sizes.__dict__, "crossing": crossing, "overflow": overflow}


def _run_child(data_dir: str, smoke: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CTXWEB_DATA_DIR=data_dir,
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SECURE_SSL_REDIRECT="0",
        CTXWEB_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    command = [sys.executable, "-m", "bench.never_blocked", "--child"]
    command += ["--smoke"] if smoke else []
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"bench.never_blocked child failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]


def _report(figures: dict[str, Any]) -> None:
    sizes, crossing, overflow = figures["sizes"], figures["crossing"], figures["overflow"]
    baseline = statistics.median(crossing["below"]) if crossing["below"] else 0.0
    added = [ms - baseline for ms in crossing["at"]]
    print("## Never blocked: `bench/never_blocked.py`\n")
    print(
        f"{sizes['conversations']} conversations through the proxy (gunicorn, one db_worker, "
        f"SQLite), a summary model that answers after {sizes['summary_seconds']:.1f} s, the "
        f"conversation's model after {sizes['answer_seconds']:.1f} s; then one conversation "
        f"of {overflow['turns']} turns against an upstream window of {UPSTREAM_WINDOW:,} "
        f"tokens under a session limit of {BELIEVED_LIMIT:,}.\n"
    )
    rows = [
        ["requests below the threshold", len(crossing["below"]), f"{baseline:.0f} ms", "-"],
        [
            "requests at the threshold",
            len(added),
            f"{statistics.median(crossing['at']):.0f} ms" if added else "-",
            f"{_p99(added):.0f} ms" if added else "-",
        ],
    ]
    print(table(["", "requests", "median time", "added p99"], rows))
    print()
    _goals(added, crossing["errors"], overflow)
    if added:
        slowest = ", ".join(f"{ms:,.0f}" for ms in sorted(added, reverse=True)[:3])
        print(f"- at the threshold: the largest added latencies (ms): {slowest}")
    ways = ", ".join(f"{n} {how}" for how, n in crossing["applied"].items()) or "none"
    print(f"- compactions applied at the crossings: {ways}")


def _goals(added: list[float], errors: int, overflow: dict[str, Any]) -> None:
    worst = _p99(added) if added else float("inf")
    print(
        goal(
            f"added latency at the threshold p99 = {worst:.0f} ms over {len(added)} requests, "
            f"{errors} errors (< {GOAL_ADDED_MS:.0f} ms, 0)",
            bool(added) and worst < GOAL_ADDED_MS and not errors,
        )
    )
    answered, turns = overflow["answered"], overflow["turns"]
    print(
        goal(
            f"upstream window smaller than believed: {answered} of {turns} answered",
            answered == turns,
        )
    )
    print(
        f"- overflow: {overflow['refused']} requests refused by the upstream, "
        f"{overflow['overflow compactions']} overflow compactions, window learned: "
        f"{overflow['learned window'] or 'none'}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if "--child" in argv:
        print(json.dumps(child("--smoke" in argv)))
        return
    args = options(__doc__, argv)
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-never-blocked-") as data_dir:
        _report(_run_child(data_dir, args.smoke))


if __name__ == "__main__":
    main()
