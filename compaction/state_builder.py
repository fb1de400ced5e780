"""Building the carried session state from a span of messages
(docs/behaviour.md#what-a-summary-always-keeps; the value is `carried_state.CarriedState`).

`carried_state` walks the span once. An earlier summary in the span gives its own state
first (the summary message's `state` key, else its text's state block, else what its
sections list), as if its span's messages came there, so nothing falls out because a summary
was summarized again: a file touched anywhere stays in every later summary while the budget
allows. Requests are the person's own words (`harness_text`); files come from the tool
calls (`tool_operations`); a call's error stays open until the same call succeeds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .carried_state import CarriedState, FileTouch
from .harness_text import clip_words, request_text
from .messages import (
    SUMMARY_KEY,
    blocks_of,
    first_nonblank_line,
    is_meta,
    is_summary_message,
    message_text,
    tool_result_text,
)
from .state_block import parse_state_block, state_from_sections
from .tool_operations import call_paths

__all__ = ["carried_state", "summary_state"]

#: How many of the latest requests and unresolved errors a state keeps, and their lengths.
LATEST_REQUESTS: Final = 2
OPEN_ERRORS: Final = 5
_FIRST_REQUEST_CHARS: Final = 400
_REQUEST_CHARS: Final = 200
_ERROR_CHARS: Final = 200
_ARGUMENT_CHARS: Final = 80
_ERROR_FIRST_LINE: Final = re.compile(
    r"^\s*(?:traceback \(most recent call last\)|(?:error|fatal|\w*(?:Error|Exception))\s*:)",
    re.IGNORECASE,
)
_ERROR_NAME: Final = re.compile(r"^\s*[\w.]*(?:Error|Exception)\b")
_TASK_CREATED: Final = re.compile(r"Task #(?P<id>\w+) created")
_TASK_LINE: Final = re.compile(r"^\[(?P<status>[^\]]*)\] #(?P<id>\w+) (?P<subject>.*)$")


def carried_state(messages: Sequence[Mapping[str, Any]]) -> CarriedState:
    """The state of a span of messages, earlier summaries in it merged (module doc)."""
    builder = _Builder()
    for message in messages:
        builder.message(message)
    return builder.state()


def summary_state(message: Mapping[str, Any]) -> CarriedState:
    """The state an earlier summary message carries: its `state` key, else its text's state
    block, else what its sections list (a summary written before states were carried)."""
    meta = message.get(SUMMARY_KEY)
    state = CarriedState.from_json(meta.get("state")) if isinstance(meta, dict) else None
    if state is not None:
        return state
    text = message_text(message)
    return parse_state_block(text) or state_from_sections(text)


@dataclass
class _Builder:
    """One walk over a span: the state so far."""

    first_request: str = ""
    requests: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> last operation, oldest first
    todos: list[str] = field(default_factory=list)
    tasks: dict[str, list[str]] = field(default_factory=dict)  # task id -> [subject, status]
    errors: dict[str, str] = field(default_factory=dict)  # call label -> error line
    asked: dict[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)

    def message(self, message: Mapping[str, Any]) -> None:
        if is_summary_message(message):
            self.merge(summary_state(message))
            self.asked = {}
            return
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        role = message.get("role")
        texts: list[str] = []
        for block in blocks_of(message):
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                calls[str(block.get("id"))] = self.tool_use(block)
            elif kind == "tool_result":
                self.tool_result(block)
        if role == "user" and not is_meta(message):
            self.request("\n".join(texts))
        self.asked = calls

    def request(self, words: str) -> None:
        """A user turn's text: the first request, and one of the latest (cut in `state`:
        most turns are not among the latest)."""
        if not self.first_request:
            self.first_request = request_text(words, _FIRST_REQUEST_CHARS)
        if words and not words.isspace():
            self.requests.append(words)
            del self.requests[: -LATEST_REQUESTS * 4]  # room for turns of boilerplate alone

    def latest_requests(self) -> tuple[str, ...]:
        """The latest requests, oldest first, without repeats or boilerplate."""
        latest: list[str] = []
        for words in reversed(self.requests):
            text = request_text(words, _REQUEST_CHARS)
            if text and text not in latest:
                latest.append(text)
            if len(latest) == LATEST_REQUESTS:
                break
        return tuple(reversed(latest))

    def touch(self, path: str, operation: str) -> None:
        self.files.pop(path, None)  # a touch moves the file to the newest end
        self.files[path] = operation

    def tool_use(self, block: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
        name = str(block.get("name") or "tool")
        raw = block.get("input")
        tool_input: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        for path, operation in call_paths(name, tool_input):
            self.touch(path, operation)
        todos, plan = tool_input.get("todos"), tool_input.get("plan")
        if isinstance(todos, list):
            self.todos = [_todo(item, "content") for item in todos if isinstance(item, Mapping)]
        elif isinstance(plan, list):
            self.todos = [_todo(item, "step") for item in plan if isinstance(item, Mapping)]
        task_id, status = tool_input.get("taskId"), tool_input.get("status")
        if task_id is not None and str(task_id) in self.tasks and isinstance(status, str):
            self.tasks[str(task_id)][1] = status
        return name, tool_input

    def tool_result(self, block: Mapping[str, Any]) -> None:
        name, tool_input = self.asked.get(str(block.get("tool_use_id")), ("tool", {}))
        content = block.get("content")
        text = content if isinstance(content, str) else tool_result_text(content)
        created = _TASK_CREATED.search(text) if name == "TaskCreate" else None
        if created and isinstance(subject := tool_input.get("subject"), str):
            self.tasks[created.group("id")] = [subject, "pending"]
        label = _label(name, tool_input)
        first = first_nonblank_line(text)
        if block.get("is_error") or _ERROR_FIRST_LINE.match(first):
            self.errors.pop(label, None)
            error = clip_words(_error_line(text, first), _ERROR_CHARS)
            self.errors[label] = f"{label} failed: {error}"
        else:
            self.errors.pop(label, None)  # the same call succeeded: that error is fixed

    def merge(self, earlier: CarriedState) -> None:
        """An earlier summary's state, as if its span's messages came here."""
        if earlier.first_request and not self.first_request:
            self.first_request = earlier.first_request
        for text in earlier.requests:
            self.request(text)
        for touch in earlier.files:
            self.touch(touch.path, touch.operation)
        if earlier.todos:
            self.todos, self.tasks = [], {}
            for line in earlier.todos:
                task = _TASK_LINE.match(line)
                if task:
                    self.tasks[task.group("id")] = [task.group("subject"), task.group("status")]
                else:
                    self.todos.append(line)
        for line in earlier.errors:
            self.errors[line.split(" failed: ", 1)[0]] = line

    def state(self) -> CarriedState:
        tasks = [f"[{status}] #{key} {subject}" for key, (subject, status) in self.tasks.items()]
        return CarriedState(
            first_request=self.first_request,
            requests=self.latest_requests(),
            files=tuple(FileTouch(path, operation) for path, operation in self.files.items()),
            todos=(*self.todos, *tasks),
            errors=tuple(list(self.errors.values())[-OPEN_ERRORS:]),
        )


def _todo(item: Mapping[str, Any], key: str) -> str:
    """One item of a todo list or plan, verbatim, with its status."""
    label = item.get(key) or item.get("activeForm") or ""
    return f"[{item.get('status', 'pending')}] {label}"


def _label(name: str, tool_input: Mapping[str, Any]) -> str:
    """`name(argument)`: the call, by its first path or its command, cut between words."""
    argument = next((path for path, _ in call_paths(name, tool_input)), "")
    command = tool_input.get("command")
    if not argument and isinstance(command, str):
        argument = first_nonblank_line(command)
    return f"{name}({clip_words(argument, _ARGUMENT_CHARS)})" if argument else name


def _error_line(text: str, first: str) -> str:
    """The line that names the error: the last `...Error:` line, else the first line."""
    for line in reversed(text.splitlines()):
        if ("Error" in line or "Exception" in line) and _ERROR_NAME.match(line):
            return line
    return first
