"""The load test's figures (bench/load.py): what the clients saw and the server stored, and
the section of bench/results.md they make."""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import goal
from bench.load_traffic import NOTHING_TO_SAVE, Api, Client, Compactor, Stats, field_of, percentile

__all__ = ["GOAL_P99_MS", "SQLITE_GOAL_P99_MS", "load_figures", "report"]

GOAL_P99_MS = 250.0
#: Issue 26 ("the embedded default under load"): SQLite, as `make run` serves it, at 20
#: clients with nothing lost.
SQLITE_GOAL_P99_MS = 300.0


def load_figures(
    api: Api,
    stats: Stats,
    elapsed: float,
    clients: list[Client],
    compactor: Compactor,
) -> dict[str, Any]:
    """Latencies, throughput and errors of the run; what the server stored and lost."""
    every = [ms for values in stats.latencies.values() for ms in values]
    problems = [*stats.errors, *compactor.errors]
    lost, compactions = _stored(api, clients, problems)
    jobs = _jobs(api, compactor, problems)
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


def _stored(api: Api, clients: list[Client], problems: list[str]) -> tuple[int, int]:
    """Messages lost (appended, or seeded, but not stored) and compactions stored, over
    every client's session; a session that cannot be read back is a problem."""
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
    return lost, compactions


def _jobs(api: Api, compactor: Compactor, problems: list[str]) -> list[str]:
    """Each background job's state; one that failed for another reason than having
    nothing to save is a problem."""
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
    return jobs


def _read(api: Api, path: str) -> tuple[int, Any]:
    """GET `path`; a failed call is (0, its error), to report, never raised."""
    try:
        return api.call("GET", path)
    except Exception as exc:
        return 0, f"{type(exc).__name__}: {exc}"


def report(kind: str, figures: dict[str, Any], rows: list[list[object]]) -> list[str]:
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
    if kind == "sqlite":
        lines.append(_sqlite_goal(figures))
    lines += [f"- {kind}: first errors: {e}" for e in figures["first_errors"]]
    lines += [f"- {kind}: server log: {e}" for e in figures.get("server_log", [])]
    if figures["p99_ms"] >= GOAL_P99_MS:
        lines.append(f"- {kind}: slowest requests: {'; '.join(figures['slowest'])}")
    return lines


def _sqlite_goal(figures: dict[str, Any]) -> str:
    """Issue 26's goal for the embedded default: p99 under 300 ms, nothing lost."""
    met = (
        figures["errors"] == 0
        and figures["p99_ms"] < SQLITE_GOAL_P99_MS
        and not figures["messages_lost"]
    )
    return goal(
        f"issue 26, the embedded default: SQLite p99 {figures['p99_ms']:.0f} ms, "
        f"{figures['messages_lost']} messages lost, {figures['errors']} errors "
        f"(< {SQLITE_GOAL_P99_MS:.0f} ms, 0, 0)",
        met,
    )
