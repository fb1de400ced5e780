"""The session state a summary carries forward (docs/behaviour.md#what-a-summary-always-keeps):
the value. `state_builder.carried_state` reads it from messages, `state_block` writes it into
a summary and reads it back.

Whatever the summarizer writes, every summary ends with this state: the first request and
the latest ones, the files the agent's tool calls touched (each with its last operation and
whether the messages kept after the summary still name it), the latest todo list verbatim
(TodoWrite, Codex's update_plan, Claude Code's TaskCreate / TaskUpdate) and the errors no
later call fixed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from .messages import blocks_of, message_text
from .tool_operations import locator_strings

__all__ = [
    "STATE_CLOSE",
    "STATE_OPEN",
    "CarriedState",
    "FileTouch",
    "expand_path_groups",
    "todo_content",
    "without_state_block",
]

#: The lines that open and close the state block of a summary (`state_block`).
STATE_OPEN: Final = "<session-state>"
STATE_CLOSE: Final = "</session-state>"
#: A brace group of paths: `src/{a,b}.py`.
_GROUP: Final = re.compile(r"(?P<pre>[^\s{}]*)\{(?P<alts>[^{}\s]*,[^{}\s]*)\}(?P<post>[^\s{}]*)")
#: A todo item as a state holds it: `[status] content`, a task's `[status] #id subject`.
_TODO_ITEM: Final = re.compile(r"^\[[^\]]*\] (?:#\w+ )?")
_BLOCK: Final = re.compile(
    re.escape(STATE_OPEN) + r".*?(?:" + re.escape(STATE_CLOSE) + r"|\Z)\n?", re.DOTALL
)


def without_state_block(text: str) -> str:
    """A summary's text without its state block: what a summarizer merges of an earlier
    summary (the engine carries the state itself)."""
    return _BLOCK.sub("", text) if STATE_OPEN in text else text


def expand_path_groups(text: str) -> str:
    """`text` with each brace group written out: `src/{a,b}.py` -> `src/a.py src/b.py`."""
    if "{" not in text:
        return text
    return _GROUP.sub(_expanded, text)


def _expanded(match: re.Match[str]) -> str:
    pre, post = match.group("pre"), match.group("post")
    return " ".join(f"{pre}{alternative}{post}" for alternative in match.group("alts").split(","))


def todo_content(item: str) -> str:
    """What a todo item says, without its status and task number."""
    return _TODO_ITEM.sub("", item, count=1)


@dataclass(frozen=True)
class FileTouch:
    """A file a tool call touched: its path, the last operation, and whether the messages
    kept after the summary (the tail) name it too."""

    path: str
    operation: str
    in_tail: bool = False


@dataclass(frozen=True)
class CarriedState:
    """The state of a session up to a summary (module doc). `files` and `errors` are oldest
    first; `todos` are the latest list's items as `[status] content`."""

    first_request: str = ""
    requests: tuple[str, ...] = ()
    files: tuple[FileTouch, ...] = ()
    todos: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not (self.first_request or self.requests or self.files or self.todos or self.errors)

    def as_json(self) -> dict[str, Any]:
        """The state as the summary message's `state` key holds it."""
        return {
            "first_request": self.first_request,
            "requests": list(self.requests),
            "files": [[touch.path, touch.operation] for touch in self.files],
            "todos": list(self.todos),
            "errors": list(self.errors),
        }

    @classmethod
    def from_json(cls, value: Any) -> CarriedState | None:
        """The state of a `state` key; None when it is not one (tolerant of missing parts)."""
        if not isinstance(value, Mapping):
            return None
        files = [
            FileTouch(str(item[0]), str(item[1]))
            for item in _list(value.get("files"))
            if isinstance(item, list | tuple) and len(item) == 2
        ]
        return cls(
            first_request=str(value.get("first_request") or ""),
            requests=tuple(str(text) for text in _list(value.get("requests"))),
            files=tuple(files),
            todos=tuple(str(text) for text in _list(value.get("todos"))),
            errors=tuple(str(text) for text in _list(value.get("errors"))),
        )

    def with_tail(self, tail: Sequence[Mapping[str, Any]]) -> CarriedState:
        """The state with each file's `in_tail` said by `tail` (the messages kept after)."""
        text = "\n".join(_searchable(tail))
        files = tuple(replace(touch, in_tail=touch.path in text) for touch in self.files)
        return replace(self, files=files)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _searchable(messages: Sequence[Mapping[str, Any]]) -> Iterable[str]:
    for message in messages:
        yield message_text(message)
        for block in blocks_of(message):
            if block.get("type") == "tool_use":
                yield from locator_strings(block.get("input"))
