"""Benchmark: count_tokens on 200K- and 1M-token synthetic histories vs raw tiktoken.

Seed 000 §4.1 target: 200K tokens counted in under 500 ms. Goal (issue 2): within 1.15x of
raw tiktoken encoding the same texts. Both sides encode exactly the pieces count_tokens
encodes (texts, tool names, compact JSON of tool inputs, tool result texts); "raw batch" is
`encode_ordinary_batch` over them (what count_tokens uses, threaded), "raw loop" one
`encode_ordinary` call per piece. Fastest of 15 interleaved runs each, after a warm-up.

Also home of `synthetic_session`, the history bench/compact.py uses.

Run: .venv/bin/python bench/tokens.py
"""

from __future__ import annotations

import os
import platform
import random
import time
from collections.abc import Callable
from typing import Any

from compaction.tokens import _message_pieces, count_tokens, get_encoding

_VOCABULARY_TEXT = (
    "def class return import self value result error test parser config request "
    "response handler session message token context limit summary compact middle tail "
    "head file path read write edit update create delete run build deploy fix bug issue "
    "the a an of to in for on with and or not is are was be this that it if else while "
    "src/app/models.py src/app/views.py tests/test_views.py README.md pyproject.toml "
    "ValueError TypeError KeyError AssertionError https://docs.python.org/3/library/json.html"
)
_VOCABULARY = tuple(_VOCABULARY_TEXT.split())


def _text(rng: random.Random, words: int) -> str:
    lines = []
    for start in range(0, words, 12):
        lines.append(" ".join(rng.choice(_VOCABULARY) for _ in range(min(12, words - start))))
    return "\n".join(lines)


def synthetic_session(message_count: int, target_tokens: int, seed: int = 0) -> list[Any]:
    """A valid agent session of `message_count` messages and about `target_tokens` tokens.

    Rounds of four messages: a user request, an assistant tool call (Read, Edit or Bash with
    a path), its tool result (the bulk of the tokens, about one in nine an error), and an
    assistant reply. One system prompt first.
    """
    rng = random.Random(seed)
    rounds = max(1, (message_count - 1) // 4)
    # About 1.48 tokens a word for this vocabulary; 80% of a round's tokens in the result.
    words_per_round = int(target_tokens / rounds / 1.48)
    result_words = int(words_per_round * 0.8)
    other_words = max(4, (words_per_round - result_words) // 3)
    messages: list[Any] = [{"role": "system", "content": "You are a careful coding agent."}]
    for number in range(rounds):
        tool_id = f"toolu_{number:06d}"
        name = ("Read", "Edit", "Bash")[number % 3]
        path = f"src/pkg_{number % 40}/module_{number % 97}.py"
        tool_input: dict[str, Any] = (
            {"command": f"pytest {path} -q"} if name == "Bash" else {"file_path": path}
        )
        failed = number % 9 == 0
        result = _text(rng, result_words)
        if failed:
            result = f"Traceback (most recent call last):\n{result}\nValueError: bad {path}"
        messages += [
            {"role": "user", "content": f"Step {number}: {_text(rng, other_words)}"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": _text(rng, other_words)},
                    {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": result,
                        **({"is_error": True} if failed else {}),
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": _text(rng, other_words)}]},
        ]
    return messages


def fastest(runs: int, **actions: Callable[[], object]) -> dict[str, float]:
    """The fastest of `runs` timed calls of each action, interleaved so that load changes
    on a shared machine hit every action alike; seconds by action name."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in times.items()}


RUNS = 15


def measure(label: str, messages_wanted: int, tokens_wanted: int) -> str:
    """One table row: count_tokens against raw tiktoken on the same pieces."""
    encoding = get_encoding()
    history = synthetic_session(messages_wanted, tokens_wanted)
    pieces = [piece for message in history for piece in _message_pieces(message, "message")[0]]
    tokens = count_tokens(history)  # also the warm-up: loads the vocabulary
    best = fastest(
        RUNS,
        ours=lambda: count_tokens(history),
        batch=lambda: encoding.encode_ordinary_batch(pieces),
        loop=lambda: sum(len(encoding.encode_ordinary(piece)) for piece in pieces),
    )
    ours, batch, loop = best["ours"], best["batch"], best["loop"]
    return (
        f"| {label} | {len(history):,} | {tokens:,} | {ours * 1000:.0f} ms "
        f"| {batch * 1000:.0f} ms | {loop * 1000:.0f} ms "
        f"| {ours / batch:.2f}x | {ours / loop:.2f}x |"
    )


def main() -> None:
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        "| history | messages | tokens | count_tokens | raw batch | raw loop | vs batch | vs loop |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(measure("200K", 1_000, 200_000))
    print(measure("1M", 5_000, 1_000_000))


if __name__ == "__main__":
    main()
