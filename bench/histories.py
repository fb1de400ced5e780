"""The synthetic agent sessions the benchmarks run on, built the same way on every run.

`synthetic_session` is the history issue 14 measured: rounds of a user request, an
assistant tool call (Read, Edit or Bash with a path), its result (80% of the tokens, about
one in nine an error) and an assistant reply, all made of words drawn from a 60-word
vocabulary. Its Read results are those words too, so the files it "views" are not code
(they hold none of the characters code is written with, so their outlines are the regex
ones, without a tree-sitter parse), and each Read names a path no other Read names.

`project_session` is the same rounds with real file views: each Read shows one of
PROJECT_FILES real Python files (from the installed Django) numbered like Claude Code's Read
output (`     1→code`), picked at random, so files are viewed again and again as an agent
does; Edit and Bash results stay word lists.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["numbered", "project_session", "project_sources", "synthetic_session"]

_VOCABULARY_TEXT = (
    "def class return import self value result error test parser config request "
    "response handler session message token context limit summary compact middle tail "
    "head file path read write edit update create delete run build deploy fix bug issue "
    "the a an of to in for on with and or not is are was be this that it if else while "
    "src/app/models.py src/app/views.py tests/test_views.py README.md pyproject.toml "
    "ValueError TypeError KeyError AssertionError https://docs.python.org/3/library/json.html"
)
_VOCABULARY = tuple(_VOCABULARY_TEXT.split())
#: Distinct files of `project_session`.
PROJECT_FILES = 40


def _text(rng: random.Random, words: int) -> str:
    lines = []
    for start in range(0, words, 12):
        lines.append(" ".join(rng.choice(_VOCABULARY) for _ in range(min(12, words - start))))
    return "\n".join(lines)


def numbered(source: str) -> str:
    """`source` as Claude Code's Read shows it: `     1→first line`."""
    return "\n".join(f"{n:6}→{line}" for n, line in enumerate(source.splitlines(), start=1))


@cache
def project_sources(count: int = PROJECT_FILES) -> tuple[tuple[str, str], ...]:
    """`count` real Python files (path, source) of 1.5-3 KB from the installed Django."""
    import django

    root = Path(django.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if 1_500 <= len(text) <= 3_000 and "def " in text:
            found.append((str(path.relative_to(root.parent)), text))
    step = max(1, len(found) // count)
    return tuple(found[::step][:count])


def synthetic_session(message_count: int, target_tokens: int, seed: int = 0) -> list[Any]:
    """A valid agent session of `message_count` messages and about `target_tokens` tokens,
    every tool result made of vocabulary words (module doc)."""
    rng = random.Random(seed)

    def read(_number: int, path: str, words: int) -> tuple[str, str]:
        return path, _text(rng, words)

    return _session(message_count, target_tokens, rng, read)


def project_session(message_count: int, target_tokens: int, seed: int = 0) -> list[Any]:
    """`synthetic_session` whose Reads show real, numbered source files (module doc)."""
    rng = random.Random(seed)
    files = project_sources()

    def read(_number: int, _path: str, _words: int) -> tuple[str, str]:
        path, source = rng.choice(files)
        return path, numbered(source)

    return _session(message_count, target_tokens, rng, read)


def _session(
    message_count: int,
    target_tokens: int,
    rng: random.Random,
    read: Callable[[int, str, int], tuple[str, str]],
) -> list[Any]:
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
        if name == "Read":
            path, result = read(number, path, result_words)
        else:
            result = _text(rng, result_words)
        tool_input: dict[str, Any] = (
            {"command": f"pytest {path} -q"} if name == "Bash" else {"file_path": path}
        )
        failed = number % 9 == 0
        if failed:
            result = f"Traceback (most recent call last):\n{result}\nValueError: bad {path}"
        messages += _round(rng, number, other_words, tool_id, name, tool_input, result, failed)
    return messages


def _round(
    rng: random.Random,
    number: int,
    words: int,
    tool_id: str,
    name: str,
    tool_input: dict[str, Any],
    result: str,
    failed: bool,
) -> list[Any]:
    return [
        {"role": "user", "content": f"Step {number}: {_text(rng, words)}"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": _text(rng, words)},
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
        {"role": "assistant", "content": [{"type": "text", "text": _text(rng, words)}]},
    ]
