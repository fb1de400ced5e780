"""How well a compacted context keeps a session's state, and whether its summaries are
grounded (docs/behaviour.md#what-a-summary-always-keeps).

One set of definitions for the quality benchmark (bench/quality.py), the web app's "what
was lost" and the tests: the state of the original messages (`state_builder.carried_state`:
the files the tool calls touched, the first request, the latest todo list, the unresolved
errors) against the text of the context that replaced them, brace groups written out.
A fragment is a path-like word of a summary that is not a whole path-like word (or a tool
input's path) of the originals; harness boilerplate in a summary line is a request taken
from the harness.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .carried_state import expand_path_groups, todo_content
from .harness_text import strip_harness
from .marked_words import marked_words
from .messages import blocks_of, message_text
from .recall import input_strings, measure_recall
from .state_builder import carried_state
from .tool_operations import word_path

__all__ = ["StateRecall", "boilerplate_lines", "path_fragments", "state_recall"]

_WORD: Final = re.compile(r"\w{3,}")
_OUTLINES: Final = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class StateRecall:
    """Which of the originals' state items the context still holds: for each kind, the
    items and the missing ones (`recall` is 1.0 for a kind with none)."""

    files: tuple[str, ...]
    missing_files: tuple[str, ...]
    goal_words: tuple[str, ...]
    missing_goal_words: tuple[str, ...]
    todos: tuple[str, ...]
    missing_todos: tuple[str, ...]
    errors: tuple[str, ...]
    missing_errors: tuple[str, ...]

    @staticmethod
    def share(items: Sequence[str], missing: Sequence[str]) -> float:
        return 1.0 if not items else (len(items) - len(missing)) / len(items)

    @property
    def file_recall(self) -> float:
        return self.share(self.files, self.missing_files)

    @property
    def goal_recall(self) -> float:
        return self.share(self.goal_words, self.missing_goal_words)

    @property
    def todo_recall(self) -> float:
        return self.share(self.todos, self.missing_todos)

    @property
    def error_recall(self) -> float:
        return self.share(self.errors, self.missing_errors)


def state_recall(
    originals: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]]
) -> StateRecall:
    """The originals' state items and which of them `context` (a compacted history, or a
    summary as one message) no longer holds verbatim."""
    state = carried_state(originals)
    written_out = [_written_out(message) for message in context]
    files = tuple(dict.fromkeys(touch.path for touch in state.files))
    todos = tuple(dict.fromkeys(todo_content(todo) for todo in state.todos))
    errors = tuple(dict.fromkeys(error.split(" failed: ", 1)[-1] for error in state.errors))
    goal = tuple(dict.fromkeys(word.lower() for word in _WORD.findall(state.first_request)))
    words = {word.lower() for text in _texts(written_out) for word in _WORD.findall(text)}
    return StateRecall(
        files=files,
        missing_files=tuple(measure_recall(files, written_out)[1]),
        goal_words=goal,
        missing_goal_words=tuple(word for word in goal if word not in words),
        todos=todos,
        missing_todos=tuple(measure_recall(todos, written_out)[1]),
        errors=errors,
        missing_errors=tuple(measure_recall(errors, written_out)[1]),
    )


def _written_out(message: Mapping[str, Any]) -> Mapping[str, Any]:
    content = message.get("content")
    if isinstance(content, str) and "{" in content:
        return {**message, "content": expand_path_groups(content)}
    return message


def _texts(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    for message in messages:
        yield message_text(message)
        for block in blocks_of(message):
            if block.get("type") == "tool_use":
                yield from input_strings(block.get("input"))


def path_fragments(summary: str, originals: Sequence[Mapping[str, Any]]) -> list[str]:
    """The path-like words of `summary` (brace groups written out, file outlines aside)
    that are no whole path-like word, nor a whole tool-input string, of the originals."""
    whole: set[str] = set()
    for text in _texts(originals):
        whole.add(text.strip())
        whole.update(path for word in marked_words(text) if (path := word_path(word)))
    text = expand_path_groups(_OUTLINES.sub("", summary))
    found = (path for word in marked_words(text) if (path := word_path(word)))
    return [path for path in dict.fromkeys(found) if path not in whole]


def boilerplate_lines(summary: str) -> list[str]:
    """The lines of `summary` (file outlines aside) that hold harness boilerplate."""
    text = _OUTLINES.sub("", summary)
    return [line for line in text.splitlines() if strip_harness(line) != line]
