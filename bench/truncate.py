"""Benchmark: smart_truncate on a synthetic 1M-token agent session (seed 002 §3, §5).

The session repeats rounds of: a user request, an assistant Read of a real Django source
file (numbered like Claude Code's Read output), a Bash call with a test log, and an
assistant answer, until it holds about 1,000,000 tokens. Prints the time of one
smart_truncate with the `smart-truncation` preset (50000 tokens, safety factor 1.5) and
what it did.

Run: .venv/bin/python bench/truncate.py
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

import django

from compaction import Policy, count_tokens, smart_truncate

TARGET_TOKENS = 1_000_000


def numbered(source: str) -> str:
    return "\n".join(f"{n:6}→{line}" for n, line in enumerate(source.splitlines(), start=1))


def sources() -> list[tuple[str, str]]:
    root = Path(django.__file__).parent
    files = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if 2_000 < len(text) < 12_000:
            files.append((str(path.relative_to(root.parent)), text))
    return files


def session() -> list[dict[str, Any]]:
    files = sources()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
    ]
    log = "\n".join(f"tests/test_{n}.py::test_case PASSED [{n}%]" for n in range(40))
    number = 0
    tokens = 0
    while tokens < TARGET_TOKENS:
        path, source = files[number % len(files)]
        read_id, bash_id = f"toolu_r{number:06d}", f"toolu_b{number:06d}"
        round_messages: list[dict[str, Any]] = [
            {"role": "user", "content": f"Step {number}: review {path} and run its tests."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading {path}."},
                    {
                        "type": "tool_use",
                        "id": read_id,
                        "name": "Read",
                        "input": {"file_path": path},
                    },
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
                    {
                        "type": "tool_use",
                        "id": bash_id,
                        "name": "Bash",
                        "input": {"command": "pytest -q"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": bash_id, "content": log}],
            },
            {"role": "assistant", "content": f"Step {number} done: {path} looks fine, tests pass."},
        ]
        messages.extend(round_messages)
        tokens += count_tokens(round_messages)
        number += 1
    return messages


def main() -> None:
    history = session()
    policy = Policy.preset("smart-truncation")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    started = time.perf_counter()
    result = smart_truncate(history, policy)
    seconds = time.perf_counter() - started
    detail = result.detail
    print(f"input: {len(history):,} messages, {result.tokens_before:,} tokens")
    print(
        f"smart_truncate: {seconds:.2f} s -> {len(result.messages):,} messages, "
        f"{result.tokens_after:,} tokens (after filtering and folding: "
        f"{detail['tokens_after_filter']:,})"
    )
    print(
        f"removed {detail['removed_tool_calls']:,} tool calls, folded "
        f"{detail['folded_results']:,} file views, deleted {detail['deleted_messages']:,} "
        f"messages (batch {detail['batch_size']:,})"
    )


if __name__ == "__main__":
    main()
