"""Benchmark: compact_messages on 1M-token, 5,000-message histories, against one raw
tiktoken pass and against langchain-core's `trim_messages`.

Goals (issue 14): `compact_messages` at most 2.5x one raw tiktoken `encode_ordinary` pass
over the same texts, and at least 2x faster than `trim_messages` with a tiktoken counter;
peak memory of a compaction under 2x the history's JSON size; the "counts cached" goal lines
hold the same two ratios to the compaction of a stored session, whose counts are cached
(issue 14: only new text is counted). Two histories
(`bench.histories`): the one issue 14 measured, whose 400-odd Reads each show a distinct
"file" of vocabulary words, and the same rounds whose Reads show real, numbered source
files viewed again and again. Two chains each: the default policy (`balanced`: selective
pruning, summary, fallbacks) and the summary alone (`steps=("summary",)`), forced, with the
extractive summarizer; "counts cached" passes `token_counts` as the web app does.

Times are the fastest of 3 runs, interleaved with the raw pass and `trim_messages` (last
strategy, a per-message tiktoken counter, trimmed to the summary-only result's tokens) so
that the machine's load hits each alike; the outline cache is emptied before each
compaction, so every run folds cold. Memory: the tracemalloc peak of one more compaction,
beyond the history already in memory. Where the time goes: the tree-sitter parses of the
file views, counted and timed in one more run.

Run: .venv/bin/python -m bench.compact [--smoke]   (make bench installs langchain-core)
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import (
    fastest,
    goal,
    langchain_trim,
    log,
    options,
    raw_pieces,
    raw_tiktoken_pass,
    table,
)
from bench.histories import project_session, synthetic_session
from compaction import (
    CompactResult,
    ExtractiveSummarizer,
    Policy,
    compact_messages,
    message_token_counts,
)
from compaction.folding import outline

RUNS = 3
CHAINS = {"balanced": Policy(), "summary only": Policy(steps=("summary",))}


def compaction(
    history: list[Any], policy: Policy, counts: list[int] | None = None
) -> Callable[[], CompactResult]:
    def run() -> CompactResult:
        outline.clear_outline_cache()  # every run folds cold
        return compact_messages(
            history, policy, summarizer=ExtractiveSummarizer(), force=True, token_counts=counts
        )

    return run


def peak_memory(action: Callable[[], object]) -> int:
    """Bytes allocated at the peak of `action`, beyond what was allocated before."""
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        action()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - baseline


def parse_profile(action: Callable[[], object]) -> tuple[int, float]:
    """(tree-sitter parses, seconds spent in them) during one `action`."""
    original = outline._parse
    seconds = [0.0]
    calls = [0]

    def timed(spec: Any, data: bytes) -> Any:
        started = time.perf_counter()
        try:
            return original(spec, data)
        finally:
            seconds[0] += time.perf_counter() - started
            calls[0] += 1

    outline._parse = timed
    try:
        action()
    finally:
        outline._parse = original
    return calls[0], seconds[0]


def measure(label: str, history: list[Any], runs: int) -> tuple[list[list[object]], list[str]]:
    """Table rows and goal lines for one history."""
    json_size = len(json.dumps(history, ensure_ascii=False).encode("utf-8"))
    counts = message_token_counts(history)
    actions: dict[str, Callable[[], object]] = {"raw": raw_tiktoken_pass(raw_pieces(history))}
    for name, policy in CHAINS.items():
        actions[name] = compaction(history, policy)
    actions["balanced, counts cached"] = compaction(history, CHAINS["balanced"], counts)
    log(f"compact: {label}: timing")
    best = fastest(runs, **actions)
    results = {name: compaction(history, policy)() for name, policy in CHAINS.items()}
    target = results["summary only"].stats.compacted_token_count
    log(f"compact: {label}: trim_messages to {target:,} tokens")
    trimmed = langchain_trim(history, target, runs)
    raw = best["raw"]
    rows: list[list[object]] = []
    goals: list[str] = []
    for name in ("balanced", "summary only", "balanced, counts cached"):
        result = results[name.split(",")[0]]
        policy = CHAINS[name.split(",")[0]]
        seconds = best[name]
        peak = peak_memory(compaction(history, policy)) if "cached" not in name else None
        versus_trim = f"{trimmed[0] / seconds:.2f}x faster" if trimmed else "-"
        rows.append(
            [
                label,
                name,
                f"{seconds * 1000:.0f} ms",
                f"{seconds / raw:.2f}x",
                versus_trim,
                f"{peak / 1e6:.1f} MB ({peak / json_size:.2f}x)" if peak is not None else "-",
                f"{result.stats.compacted_token_count:,}",
            ]
        )
        goals += _goals(label, name, seconds / raw, trimmed[0] / seconds if trimmed else None)
        if peak is not None:
            goals.append(_memory_goal(label, name, peak, json_size))
    notes = _notes(label, history, counts, json_size, raw, trimmed)
    return rows, [*goals, *(f"- {note}" for note in notes)]


def _goals(label: str, name: str, versus_raw: float, trim_ratio: float | None) -> list[str]:
    """The speed goals of the chain `name`: against the raw pass, and against trim_messages."""
    if name == "balanced":
        ours, what = "compact_messages (balanced)", ""
    elif name == "balanced, counts cached":  # the same goals, for a stored session
        ours, what = "compact_messages (balanced, counts cached)", "counts cached: "
    else:
        return []
    goals = [
        goal(
            f"{label}: {what}{ours} / raw tiktoken pass = {versus_raw:.2f}x (≤ 2.5x)",
            versus_raw <= 2.5,
        )
    ]
    if trim_ratio is not None:
        goals.append(
            goal(
                f"{label}: {what}trim_messages / {ours} = {trim_ratio:.2f}x (≥ 2x)",
                trim_ratio >= 2,
            )
        )
    return goals


def _memory_goal(label: str, name: str, peak: float, json_size: int) -> str:
    return goal(
        f"{label}: peak memory of a compaction ({name}) = {peak / json_size:.2f}x the "
        "JSON size (< 2x)",
        peak < 2 * json_size,
    )


def _notes(
    label: str,
    history: list[Any],
    counts: list[int],
    json_size: int,
    raw: float,
    trimmed: tuple[float, int] | None,
) -> list[str]:
    """What the history is, what trim_messages kept, and the tree-sitter parses' share."""
    parses, parse_seconds = parse_profile(compaction(history, CHAINS["balanced"]))
    return [
        f"{label}: {len(history):,} messages, {sum(counts):,} tokens, JSON "
        f"{json_size / 1e6:.1f} MB; raw tiktoken pass {raw * 1000:.0f} ms",
        f"{label}: trim_messages "
        + (
            f"{trimmed[0] * 1000:.0f} ms, kept {trimmed[1]:,} tokens"
            if trimmed
            else "skipped (langchain-core is not installed: `make bench` installs it)"
        ),
        f"{label}: one balanced compaction made {parses} tree-sitter parses taking "
        f"{parse_seconds * 1000:.0f} ms ({parse_seconds / raw:.2f}x the raw pass)",
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = options(__doc__, argv)
    messages, tokens = (200, 40_000) if args.smoke else (5_000, 1_000_000)
    runs = 1 if args.smoke else RUNS
    histories = {
        "issue 14 history": synthetic_session(messages, tokens),
        "real file views": project_session(messages, tokens),
    }
    compaction(histories["issue 14 history"], Policy())()  # warm-up: grammars, vocabulary
    rows: list[list[object]] = []
    lines: list[str] = []
    for label, history in histories.items():
        more_rows, more_lines = measure(label, history, runs)
        rows += more_rows
        lines += more_lines
    print("## Compaction: `bench/compact.py`\n")
    print(
        f"`compact_messages(..., force=True)` with the extractive summarizer; fastest of {runs}"
        " runs, interleaved with the raw pass and trim_messages.\n"
    )
    print(
        table(
            [
                "history",
                "chain",
                "time",
                "x raw tiktoken pass",
                "vs trim_messages",
                "peak memory (x JSON)",
                "tokens after",
            ],
            rows,
        )
    )
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
