"""The load test's clients (bench/load.py): an API connection, the simulated agents and the
side thread asking for background compactions, and the latencies they record."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MIX",
    "NOTHING_TO_SAVE",
    "Api",
    "Client",
    "Compactor",
    "Stats",
    "field_of",
    "percentile",
    "text",
]

MIX = (("append", 0.6), ("context", 0.3), ("check", 0.1))
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


def text(rng: random.Random, words: int) -> str:
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
            {"role": "user", "content": text(self.rng, 40)},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text(self.rng, 60)}],
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
