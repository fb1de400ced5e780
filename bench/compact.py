"""Benchmark: compact_messages with ExtractiveSummarizer on a 1M-token, 5,000-message history.

Goals (issue 2, seed 000 §4.1): under 1.5 s wall time, and peak memory during the
compaction under 2x the history's JSON size. Two chains are measured: the default policy
(`balanced`: selective pruning, summary, fallbacks) and the seed 000 flow alone
(`steps=("summary",)`). Time is the fastest of 3 runs; memory is measured in a separate
run under tracemalloc (which slows Python down), as the peak of memory allocated while
compacting, on top of the history already in memory.

For comparison, the same history goes through langchain-core's `trim_messages` (the
optional `bench` dependency group) with a per-message tiktoken counter, trimmed to the
same token count compact_messages produced. Skipped, with a note, when langchain-core
is not installed.

Run: .venv/bin/python bench/compact.py   (make bench installs the bench group first)
"""

from __future__ import annotations

import gc
import json
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from compaction import ExtractiveSummarizer, Policy, compact_messages, count_tokens, message_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from bench.tokens import synthetic_session  # the same history generator

MESSAGES = 5_000
TOKENS = 1_000_000
RUNS = 3


def timed(history: list[Any], policy: Policy) -> tuple[float, Any]:
    """Fastest of RUNS compactions (forced, so the threshold never skips it)."""
    best = float("inf")
    result = None
    for _ in range(RUNS):
        gc.collect()
        started = time.perf_counter()
        result = compact_messages(history, policy, summarizer=ExtractiveSummarizer(), force=True)
        best = min(best, time.perf_counter() - started)
    return best, result


def peak_memory(history: list[Any], policy: Policy) -> int:
    """Bytes allocated at the peak of one compaction, beyond what was allocated before."""
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        compact_messages(history, policy, summarizer=ExtractiveSummarizer(), force=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - baseline


def langchain_trim(history: list[Any], max_tokens: int) -> tuple[float, int] | None:
    """Seconds and tokens kept by trim_messages, or None when langchain-core is missing."""
    try:
        from langchain_core.messages import (
            AIMessage,
            BaseMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
            trim_messages,
        )
    except ImportError:
        return None

    def convert(message: dict[str, Any]) -> BaseMessage:
        content = message["content"]
        if message["role"] == "system":
            return SystemMessage(content=content)
        if isinstance(content, str):
            return HumanMessage(content=content)
        texts = "\n".join(b["text"] for b in content if b["type"] == "text")
        if message["role"] == "assistant":
            calls = [
                {"name": b["name"], "args": b["input"], "id": b["id"]}
                for b in content
                if b["type"] == "tool_use"
            ]
            return AIMessage(content=texts, tool_calls=calls)
        result = next(b for b in content if b["type"] == "tool_result")
        return ToolMessage(content=result["content"], tool_call_id=result["tool_use_id"])

    def count_one(message: BaseMessage) -> int:
        text = message.content if isinstance(message.content, str) else str(message.content)
        calls = getattr(message, "tool_calls", None) or []
        return message_tokens({"content": text}) + sum(
            message_tokens({"content": json.dumps(call["args"])}) for call in calls
        )

    def count(messages: list[BaseMessage]) -> int:  # what trim_messages calls, many times
        return sum(count_one(message) for message in messages)

    converted = [convert(message) for message in history]
    gc.collect()
    started = time.perf_counter()
    trimmed = trim_messages(
        converted,
        max_tokens=max_tokens,
        token_counter=count,
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
    )
    elapsed = time.perf_counter() - started
    return elapsed, count(trimmed)


def main() -> None:
    history = synthetic_session(MESSAGES, TOKENS)
    json_size = len(json.dumps(history, ensure_ascii=False).encode("utf-8"))
    tokens = count_tokens(history)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"history: {len(history):,} messages, {tokens:,} tokens, JSON {json_size / 1e6:.1f} MB")
    print("| chain | time | peak extra memory | x JSON size | tokens after | steps that changed |")
    print("|---|---|---|---|---|---|")
    results = {}
    for label, policy in (
        ("balanced (default)", Policy()),
        ("summary only (seed 000)", Policy(steps=("summary",))),
    ):
        seconds, result = timed(history, policy)
        peak = peak_memory(history, policy)
        results[label] = (seconds, result)
        changed = ", ".join(s.step for s in result.steps if s.changed) or "-"
        print(
            f"| {label} | {seconds * 1000:.0f} ms | {peak / 1e6:.1f} MB "
            f"| {peak / json_size:.2f}x | {result.stats.compacted_token_count:,} | {changed} |"
        )
    target = results["summary only (seed 000)"][1].stats.compacted_token_count
    trimmed = langchain_trim(history, target)
    if trimmed is None:
        print(
            "langchain-core trim_messages: skipped (langchain-core is not installed; "
            "`make bench` installs the optional bench group)"
        )
        return
    seconds, kept = trimmed
    print(
        f"langchain-core trim_messages to {target:,} tokens: {seconds * 1000:.0f} ms "
        f"({kept:,} tokens kept, older messages dropped, no summary)"
    )
    for label, (ours, _) in results.items():
        print(f"time ratio compact_messages {label} / trim_messages: {ours / seconds:.2f}")


if __name__ == "__main__":
    main()
