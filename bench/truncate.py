"""Benchmark: smart_truncate on a synthetic 1M-token agent session
(docs/behaviour.md#smart-truncation), against one raw tiktoken pass and against langchain-core's
`trim_messages`.

The session repeats rounds of: a user request, an assistant Read of a real Django source
file (numbered like Claude Code's Read output), a Bash call with a test log, and an
assistant answer, until it holds about 1,000,000 tokens. Goals (issue 14): at most 2.5x one
raw tiktoken pass over the same texts and at least 2x faster than `trim_messages` (trimmed
to the tokens smart_truncate keeps). `smart-truncation` preset (50000 tokens, safety factor
1.5); fastest of 3 interleaved runs, outline cache emptied before each. The session repeats
texts (files read again, the same test log each round), and smart_truncate encodes each
distinct text once: the output says how many of the tokens are in distinct texts, and the
time with the messages' counts given (`token_counts`, a stored session), for information.

Run: .venv/bin/python -m bench.truncate [--smoke]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import django

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
from bench.histories import numbered
from compaction import Policy, TruncateResult, count_tokens, message_token_counts, smart_truncate
from compaction.folding import outline

RUNS = 3


def sources() -> list[tuple[str, str]]:
    root = Path(django.__file__).parent
    files = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if 2_000 < len(text) < 12_000:
            files.append((str(path.relative_to(root.parent)), text))
    return files


def session(target_tokens: int) -> list[dict[str, Any]]:
    files = sources()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
    ]
    log_text = "\n".join(f"tests/test_{n}.py::test_case PASSED [{n}%]" for n in range(40))
    number = 0
    tokens = 0
    while tokens < target_tokens:
        path, source = files[number % len(files)]
        round_messages = _round(number, path, source, log_text)
        messages.extend(round_messages)
        tokens += count_tokens(round_messages)
        number += 1
    return messages


def _round(number: int, path: str, source: str, log_text: str) -> list[dict[str, Any]]:
    read_id, bash_id = f"toolu_r{number:06d}", f"toolu_b{number:06d}"
    return [
        {"role": "user", "content": f"Step {number}: review {path} and run its tests."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Reading {path}."},
                {"type": "tool_use", "id": read_id, "name": "Read", "input": {"file_path": path}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": read_id, "content": numbered(source)}
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": bash_id, "name": "Bash", "input": {"command": "pytest"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": bash_id, "content": log_text}],
        },
        {"role": "assistant", "content": f"Step {number} done: {path} looks fine, tests pass."},
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = options(__doc__, argv)
    history = session(40_000 if args.smoke else 1_000_000)
    runs = 1 if args.smoke else RUNS
    best, result, distinct = _timed(history, runs)
    log("truncate: trim_messages")
    trimmed = langchain_trim(history, result.tokens_after, runs)
    seconds, raw = best["truncate"], best["raw"]
    print("## Smart truncation: `bench/truncate.py`\n")
    print(
        f"`smart_truncate` (`smart-truncation` preset) on {len(history):,} messages, "
        f"{result.tokens_before:,} tokens; fastest of {runs} runs.\n"
    )
    print(
        f"Of its {result.tokens_before:,} tokens, {distinct:,} are in distinct texts: "
        "smart_truncate encodes each distinct text once (the same file read again, the same "
        "tool output), the raw pass and trim_messages encode every text. Given the messages' "
        f"cached counts (`token_counts`, as for a stored session) it takes "
        f"{best['stored'] * 1000:.0f} ms ({best['stored'] / best['raw']:.2f}x raw).\n"
    )
    print(table(HEADERS, [_row(result, seconds, raw, trimmed)]))
    print()
    print(
        goal(
            f"smart_truncate / raw tiktoken pass = {seconds / raw:.2f}x (≤ 2.5x)",
            seconds / raw <= 2.5,
        )
    )
    if trimmed:
        print(
            goal(
                f"trim_messages / smart_truncate = {trimmed[0] / seconds:.2f}x (≥ 2x)",
                trimmed[0] / seconds >= 2,
            )
        )


def _timed(history: list[Any], runs: int) -> tuple[dict[str, float], TruncateResult, int]:
    """The fastest raw pass, smart_truncate and smart_truncate with cached counts; the
    last result; the tokens of the distinct texts."""
    policy = Policy.preset("smart-truncation")
    results: list[TruncateResult] = []

    def truncate() -> None:
        outline.clear_outline_cache()
        results.append(smart_truncate(history, policy))

    cached = message_token_counts(history, policy.encoding)

    def stored() -> None:  # a stored session: its messages' counts are cached
        outline.clear_outline_cache()
        smart_truncate(history, policy, token_counts=cached)

    truncate()  # warm-up: grammars, vocabulary
    log("truncate: timing")
    pieces = raw_pieces(history)
    best = fastest(runs, raw=raw_tiktoken_pass(pieces), truncate=truncate, stored=stored)
    distinct = raw_tiktoken_pass(list(dict.fromkeys(pieces)))()
    return best, results[-1], distinct


HEADERS = (
    "time",
    "x raw tiktoken pass",
    "trim_messages",
    "messages after",
    "tokens after (before deletion)",
    "removed tool calls",
    "folded file views",
    "deleted messages (batch)",
)


def _row(
    result: TruncateResult, seconds: float, raw: float, trimmed: tuple[float, int] | None
) -> list[object]:
    detail = result.detail
    return [
        f"{seconds * 1000:.0f} ms",
        f"{seconds / raw:.2f}x ({raw * 1000:.0f} ms)",
        f"{trimmed[0] * 1000:.0f} ms ({trimmed[0] / seconds:.2f}x slower)" if trimmed else "-",
        f"{len(result.messages):,}",
        f"{result.tokens_after:,} ({detail['tokens_after_filter']:,})",
        f"{detail['removed_tool_calls']:,}",
        f"{detail['folded_results']:,}",
        f"{detail['deleted_messages']:,} ({detail['batch_size']:,})",
    ]


if __name__ == "__main__":
    main()
