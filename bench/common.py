"""What the benchmark scripts share: the command line, timing, the raw tiktoken baseline,
langchain-core's `trim_messages` as the peer, and Markdown output.

Every script prints its section of bench/results.md as Markdown on stdout (progress goes
to stderr), so `python -m bench` can write the file from the run itself; a goal line
starts with `- goal:` and ends with `met` or `NOT met`, and the runner lists them first.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = [
    "django_owner",
    "fastest",
    "goal",
    "langchain_trim",
    "log",
    "options",
    "raw_pieces",
    "raw_tiktoken_pass",
    "table",
]


def options(description: str | None, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """`--smoke`: small sizes and one run, to check the script still works (no figures kept)."""
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run")
    return parser.parse_args(argv)


def django_owner(prefix: str) -> Any:
    """In a benchmark's child process: Django set up on a throwaway data directory (its
    SQLite database migrated, the token vocabulary loaded) and a user "bench" to own what
    the benchmark stores."""
    os.environ["CTXWEB_DATA_DIR"] = tempfile.mkdtemp(prefix=prefix)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from compaction import get_encoding

    call_command("migrate", verbosity=0)
    get_encoding()
    return get_user_model().objects.create_user("bench")


def log(message: str) -> None:
    """Progress for the person waiting (stderr), never part of the results."""
    print(message, file=sys.stderr, flush=True)


def fastest(runs: int, **actions: Callable[[], object]) -> dict[str, float]:
    """The fastest of `runs` timed calls of each action, interleaved so that load changes on
    a shared machine hit every action alike; seconds by action name. A garbage collection
    runs before each call, outside the timing."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            gc.collect()
            started = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in times.items()}


def raw_pieces(history: Iterable[Any]) -> list[str]:
    """The texts count_tokens encodes for `history` (texts, tool names, tool input JSON,
    tool result texts): the input of the raw tiktoken baseline."""
    from compaction.tokens import _message_pieces  # not at import: the server scripts skip it

    return [piece for message in history for piece in _message_pieces(message, "message")[0]]


def raw_tiktoken_pass(pieces: Sequence[str]) -> Callable[[], int]:
    """One plain `encode_ordinary` pass over `pieces` (the baseline the ratios divide by)."""
    from compaction import get_encoding

    encode = get_encoding().encode_ordinary

    def run() -> int:
        return sum(len(encode(piece)) for piece in pieces)

    return run


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def goal(text: str, met: bool) -> str:
    """One goal line, as the runner collects them."""
    return f"- goal: {text}: {'met' if met else 'NOT met'}"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


# langchain-core's trim_messages, the simpler peer ------------------------------------------


def langchain_trim(history: list[Any], max_tokens: int, runs: int) -> tuple[float, int] | None:
    """Fastest seconds of `trim_messages` (strategy "last", a per-message tiktoken counter)
    down to `max_tokens`, and the tokens it kept; None when langchain-core is missing."""
    try:
        from langchain_core.messages import BaseMessage, trim_messages
    except ImportError:
        return None
    from compaction import get_encoding

    encode = get_encoding().encode_ordinary

    def count_one(message: BaseMessage) -> int:
        text = message.content if isinstance(message.content, str) else str(message.content)
        calls = getattr(message, "tool_calls", None) or []
        return len(encode(text)) + sum(len(encode(json.dumps(c["args"]))) for c in calls)

    def count(messages: list[BaseMessage]) -> int:  # what trim_messages calls, many times
        return sum(count_one(message) for message in messages)

    converted = [_langchain_message(message) for message in history]
    kept: list[BaseMessage] = []

    def trim() -> None:
        kept[:] = trim_messages(
            converted,
            max_tokens=max_tokens,
            token_counter=count,
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        )

    seconds = fastest(runs, trim=trim)["trim"]
    return seconds, count(kept)


def _langchain_message(message: dict[str, Any]) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    content = message["content"]
    role = message["role"]
    if role == "system":
        return SystemMessage(content=content)
    if isinstance(content, str):
        return AIMessage(content=content) if role == "assistant" else HumanMessage(content=content)
    texts = "\n".join(b["text"] for b in content if b["type"] == "text")
    if role == "assistant":
        calls = [
            {"name": b["name"], "args": b["input"], "id": b["id"]}
            for b in content
            if b["type"] == "tool_use"
        ]
        return AIMessage(content=texts, tool_calls=calls)
    results = [b for b in content if b["type"] == "tool_result"]
    if not results:
        return HumanMessage(content=texts)
    result = results[0]
    return ToolMessage(content=result["content"], tool_call_id=result["tool_use_id"])
