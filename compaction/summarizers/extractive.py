"""`ExtractiveSummarizer`: the offline default. No model: a deterministic, structured summary
built from the messages themselves, in the sections of the LLM prompt.

It collects user requests, file operations (from tool inputs and paths in the text), tool
calls with their outcomes, errors and what followed them, open items (todo lists, TODO
lines) and the content of earlier summaries. An earlier summary is merged structurally,
not re-summarized (`summary_merge`): its goal stays the goal, its files, tool counts, todos
and errors join the new ones, and newer facts update older ones, so summaries of summaries
do not drift. Identifiers are copied verbatim. The result fits `max_tokens` (tiktoken,
`summary_fit`): the least recent detail goes first and the summary says what it left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from ..marked_words import marked_words
from ..messages import (
    first_nonblank_line,
    is_meta,
    is_summary_message,
    message_text,
    tool_result_text,
)
from ..tokens import compact_json
from .base import SummaryRequest
from .beside_state import beside_state
from .prompt import SECTIONS
from .summary_fit import KEY_IDENTIFIERS, Line, dedupe, fit
from .summary_merge import EarlierSummary, parse_summary

__all__ = ["KEY_IDENTIFIERS", "ExtractiveSummarizer"]

GOALS, FILES, TOOLS, STATE, ERRORS = SECTIONS
_PATH_KEYS: Final = ("file_path", "path", "filename", "file", "notebook_path", "target_file")
_PATH_LIST_KEYS: Final = ("paths", "files", "file_paths")
_INPUT_PATH_KEYS: Final = frozenset(_PATH_KEYS + _PATH_LIST_KEYS)
#: The keys of a call's argument, best first (`_argument`).
_ARGUMENT_KEYS: Final = (*_PATH_KEYS, "command", "cmd", "query", "pattern", "url")
_OPERATIONS: Final = (  # (words of a tool name or command, operation), first match wins
    (frozenset({"delete", "remove", "unlink", "rm", "rmdir"}), "deleted"),
    (frozenset({"write", "create", "new", "save", "touch", "tee", "mkdir"}), "written"),
    (
        frozenset({"edit", "replace", "patch", "insert", "update", "modify", "append", "sed"}),
        "modified",
    ),
    (
        frozenset({"read", "view", "cat", "open", "show", "glob", "grep", "search", "list"})
        | frozenset({"ls", "head", "tail", "less", "find", "rg"}),
        "read",
    ),
)
_PATH_TOKEN: Final = re.compile(
    r"(?:\.{1,2}/|/|~/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}"
    r"|[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|c|h|cc|cpp|hpp|cs|rb|php|"
    r"md|json|yaml|yml|toml|ini|cfg|txt|sh|sql|html|css)"
)
_EDGE_PUNCTUATION: Final = "()[]{}<>,;:'\"`!?*"
_ERROR_LINE: Final = re.compile(
    r"^\s*(?:traceback \(most recent call last\)|(?:error|fatal|\w*(?:Error|Exception))\s*:)",
    re.IGNORECASE,
)
_TODO_LINE: Final = re.compile(r"\b(?:TODO|FIXME|next steps?|still need|remaining)\b", re.I)
_ERROR_NAME: Final = re.compile(r"^\s*[\w.]*(?:Error|Exception)\b")
_LOWER_WORD: Final = re.compile(r"[a-z]+")
_CAMEL_JOINT: Final = re.compile(r"([a-z])([A-Z])")
#: Operations that say only that a path came up, shown when nothing else is known.
_WEAK_OPERATIONS: Final = ("mentioned", "touched")
# Priorities (lower is kept first): the original goal; the current request, todo list,
# latest update and tool counts; errors, decisions and open items; files and older
# requests; paths only mentioned; each tool call; tool calls an earlier summary listed.
_GOAL, _CURRENT, _KEEP, _DETAIL, _MENTION, _CALL, _EARLIER_CALL = 0, 1, 2, 3, 4, 5, 6
#: `Line(*fields)` without the call of its `__new__` (a line for most messages).
_line: Final = tuple.__new__


@dataclass
class _Call:
    name: str
    input: Mapping[str, Any]
    order: int


@dataclass
class _Collector:
    """Walks the messages once and gathers the summary lines."""

    line_chars: int
    lines: list[Line] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)  # this message's, by id
    asked: dict[str, _Call] = field(default_factory=dict)  # the previous message's, by id
    files: dict[str, list[str]] = field(default_factory=dict)
    file_order: dict[str, float] = field(default_factory=dict)
    tool_counts: dict[str, list[int]] = field(default_factory=dict)  # name -> [calls, failed]
    open_errors: dict[str, int] = field(default_factory=dict)  # tool name -> line index
    todos: list[str] = field(default_factory=list)
    todo_order: float = 0
    latest_update: tuple[float, str] | None = None
    latest_text: tuple[float, str] | None = None  # a newer update, still a whole text
    latest_request: int | None = None  # index in `lines`
    seen_request: bool = False
    dropped: dict[str, int] = field(default_factory=dict)  # lines earlier summaries left out

    def add(self, section: str, text: str, priority: int, order: float) -> None:
        self.lines.append(_line(Line, (section, text, priority, order, None)))

    def clip(self, text: str, share: float = 1.0) -> str:
        """`text` on one line, cut at a word boundary to `share` of line_chars."""
        limit = max(20, int(self.line_chars * share))
        if len(text) <= limit and _single_spaced(text):  # the commonest case: as it is
            return text
        text = " ".join(text.split())
        if len(text) <= limit:
            return text
        return text[:limit].rsplit(" ", 1)[0] + " …"

    def message(self, order: int, message: Mapping[str, Any]) -> None:
        # A result answers a call of the message right before it: ids may repeat across turns.
        self.asked, self.calls = self.calls, {}
        if is_summary_message(message):
            self.earlier_summary(order, parse_summary(message_text(message)))
            return
        role = message.get("role")  # what reads its texts: `reader`, inline
        if role == "assistant":
            read: Callable[[int, str], None] | None = self.assistant_text
        else:
            read = self.reader(role, message)
        content = message.get("content")
        if isinstance(content, str):  # one text block
            if read is not None:
                read(order, content)
            return
        for block in content if isinstance(content, list) else ():  # `blocks_of`, no copy
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                if read is not None:
                    read(order, str(block.get("text", "")))
            elif kind == "tool_use":
                self.tool_use(order, block)
            elif kind == "tool_result":
                self.tool_result(order, block)

    def reader(self, role: Any, message: Mapping[str, Any]) -> Callable[[int, str], None] | None:
        """What reads the message's texts, by its role; None when they say nothing."""
        if role == "user":
            return None if is_meta(message) else self.user_text
        if role == "assistant":
            return self.assistant_text
        if role == "system":  # mid-conversation notes: paths, TODOs
            return self.text_mentions
        return None

    def earlier_summary(self, order: int, summary: EarlierSummary) -> None:
        """Merge an earlier summary's parts (`summary_merge`); its lines keep their order,
        just before the messages that followed it."""
        count = sum(len(lines) for lines in summary.lines.values()) + len(summary.files) + 1
        position = (order + k / (count + 1) for k in range(count + 1))
        for index, line in enumerate(summary.lines.get(GOALS, [])):
            if index == 0 and not self.seen_request:  # the goal of the whole session
                priority = _GOAL
                self.seen_request = True
            else:
                priority = _DETAIL if line.startswith("- User asked:") else _KEEP
            self.add(GOALS, line, priority, next(position))
        for line in summary.lines.get(KEY_IDENTIFIERS, []):
            self.add(GOALS, line, _CURRENT, next(position))
        for path, operations in summary.files:
            at = next(position)
            for operation in operations or ["touched"]:
                self.file(path, operation, at)
        for name, (calls, failed) in summary.tool_counts.items():
            counts = self.tool_counts.setdefault(name, [0, 0])
            counts[0] += calls
            counts[1] += failed
        if summary.todos:
            self.todos, self.todo_order = list(summary.todos), order
        if summary.latest_update:
            self.latest_update, self.latest_text = (order, summary.latest_update), None
        priorities = {FILES: _DETAIL, TOOLS: _EARLIER_CALL, STATE: _KEEP, ERRORS: _KEEP}
        for section, priority in priorities.items():
            for line in summary.lines.get(section, []):
                self.add(section, line, priority, next(position))
        for section, dropped in summary.dropped.items():
            self.dropped[section] = self.dropped.get(section, 0) + dropped

    def user_text(self, order: int, text: str) -> None:
        first = _first_line(text)
        if first:
            priority = _DETAIL if self.seen_request else _GOAL
            self.seen_request = True
            self.latest_request = len(self.lines)
            self.add(GOALS, f"- User asked: {self.clip(first)}", priority, order)
        self.text_mentions(order, text)

    def assistant_text(self, order: int, text: str) -> None:
        if text and not text.isspace():  # it has a first non-blank line: the latest update
            self.latest_text = (order, text)  # clipped in `finish`: only the last one shows
        self.text_mentions(order, text)

    def text_mentions(self, order: int, text: str) -> None:
        if _may_hold_todo(text) and _TODO_LINE.search(text):
            for line in text.splitlines():
                if _TODO_LINE.search(line):
                    self.add(STATE, f"- Open item: {self.clip(line, 0.7)}", _KEEP, order)
        if "." not in text:  # every path has one (`_paths_in`)
            return
        files, file_order = self.files, self.file_order
        for word in marked_words(text):
            if "." in word and (path := _word_path(word)):
                # `file(path, "mentioned", order)`, inline: texts name many paths
                operations = files.get(path)
                if operations is None:
                    files[path] = ["mentioned"]
                elif "mentioned" not in operations:
                    operations.append("mentioned")
                file_order[path] = order

    def tool_use(self, order: int, block: Mapping[str, Any]) -> None:
        name = str(block.get("name", "tool"))
        raw_input = block.get("input")
        tool_input: Mapping[str, Any] = (
            raw_input if type(raw_input) is dict or isinstance(raw_input, Mapping) else {}
        )
        self.calls[str(block.get("id"))] = _Call(name, tool_input, order)
        self.tool_counts.setdefault(name, [0, 0])[0] += 1
        operation = _operation(name, tool_input)
        for path in _input_paths(tool_input):
            self.file(path, operation, order)
        command = tool_input.get("command")
        if isinstance(command, str):
            for path in _paths_in(command):
                self.file(path, operation, order)
        todos = tool_input.get("todos")
        if isinstance(todos, list):
            self.todo_list(order, todos)

    def todo_list(self, order: int, todos: list[Any]) -> None:
        """The newest todo list wins: its unfinished items are the open items."""
        self.todo_order = order
        self.todos = []
        for item in todos:
            if isinstance(item, Mapping) and item.get("status") != "completed":
                label = item.get("content") or item.get("activeForm") or ""
                self.todos.append(f"- [{item.get('status', 'pending')}] {self.clip(str(label))}")

    def tool_result(self, order: int, block: Mapping[str, Any]) -> None:
        call = self.asked.get(str(block.get("tool_use_id")))
        name = call.name if call else "tool"
        argument = _argument(call.input) if call else ""
        content = block.get("content")
        text = content if isinstance(content, str) else tool_result_text(content)
        first = _first_line(text)
        failed = bool(block.get("is_error")) or bool(_ERROR_LINE.match(first))
        label = f"{name}({self.clip(argument, 0.4)})" if argument else name
        if failed:
            self.tool_counts.setdefault(name, [0, 0])[1] += 1
            error = self.clip(_error_line(text, first) or "(no message)", 0.7)
            self.add(TOOLS, f"- {label} → failed: {error}", _CALL, order)
            self.open_errors[name] = len(self.lines)
            self.add(ERRORS, f"- {label} failed: {error}", _KEEP, order)
        else:
            outcome = f": {self.clip(first, 0.4)}" if first else ""
            self.add(TOOLS, f"- {label} → ok{outcome}", _CALL, order)
            self.fix(name, label)

    def fix(self, name: str, label: str) -> None:
        """A later success of a tool that failed: record it as the fix of that error."""
        index = self.open_errors.pop(name, None)
        if index is not None:
            line = self.lines[index]
            fixed = Line(line.section, f"{line.text}; then {label} succeeded", _KEEP, line.order)
            self.lines[index] = fixed

    def file(self, path: str, operation: str, order: float) -> None:
        operations = self.files.setdefault(path, [])
        self.file_order[path] = order
        if operation not in operations:
            operations.append(operation)

    def finish(self) -> None:
        """Lines that summarise the whole span: files, tool counts, current state."""
        for path, operations in self.files.items():
            if len(operations) == 1:  # shown whatever it is: the commonest case
                shown = operations
            else:
                shown = [op for op in operations if op not in _WEAK_OPERATIONS] or operations[:1]
            priority = _MENTION if shown == ["mentioned"] else _DETAIL
            text = f"- {path}: {', '.join(shown)}"
            self.lines.append(Line(FILES, text, priority, self.file_order[path], path))
        if self.tool_counts:
            counts = ", ".join(
                f"{name} x{calls}" + (f" ({failed} failed)" if failed else "")
                for name, (calls, failed) in sorted(
                    self.tool_counts.items(), key=lambda item: (-item[1][0], item[0])
                )
            )
            total = sum(calls for calls, _ in self.tool_counts.values())
            self.add(TOOLS, f"- {total} tool calls: {counts}", _CURRENT, -1)
        for todo in self.todos:
            self.add(STATE, todo, _CURRENT, self.todo_order)
        if self.latest_text:
            order, text = self.latest_text
            self.latest_update = (order, self.clip(first_nonblank_line(text), 0.7))
        if self.latest_update:
            order, text = self.latest_update
            self.add(STATE, f"- Latest assistant update: {text}", _CURRENT, order)
        if self.latest_request is not None:  # the newest request is the current task
            request = self.lines[self.latest_request]
            if request.priority > _CURRENT:
                self.lines[self.latest_request] = request._replace(priority=_CURRENT)


def _operation(name: str, tool_input: Mapping[str, Any]) -> str:
    """What a call does to the files it names: from its command's first word, else its name."""
    command = tool_input.get("command")
    if isinstance(command, str) and command.strip():
        operation = _word_operation(command.split(maxsplit=1)[0])
        if operation is not None:
            return operation
    return _word_operation(name) or "used"


@lru_cache(maxsize=1024)
def _word_operation(text: str) -> str | None:
    """The operation the words of a tool name or command name (`_OPERATIONS`), if any."""
    words = _words(text)
    for keys, operation in _OPERATIONS:
        if words & keys:
            return operation
    return None


def _words(text: str) -> set[str]:
    """Lowercase words of an identifier or command: `MultiEdit` -> {multi, edit}."""
    return set(_LOWER_WORD.findall(_CAMEL_JOINT.sub(r"\1 \2", text).lower()))


def _may_hold_todo(text: str) -> bool:
    """False only when `_TODO_LINE` cannot match: an ASCII text without its words in any
    case (a quick test before the regex, which is slow on long texts)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return (
        "todo" in lowered
        or "fixme" in lowered
        or "next step" in lowered
        or "still need" in lowered
        or "remaining" in lowered
    )


def _paths_in(text: str) -> list[str]:
    """File paths written in free text: words that look like `dir/name.ext` or `name.py`
    (every path `_PATH_TOKEN` matches has a dot)."""
    return [path for word in marked_words(text) if "." in word and (path := _word_path(word))]


@lru_cache(maxsize=4096)
def _word_path(word: str) -> str | None:
    """The path a word of free text names, without its edge punctuation; None if none."""
    candidate = word.strip(_EDGE_PUNCTUATION).rstrip(".")
    return candidate if _PATH_TOKEN.fullmatch(candidate) else None


def _input_paths(tool_input: Mapping[str, Any]) -> list[str]:
    """The paths a tool input names under its path keys, in the order of the keys."""
    paths: list[str] = []
    if _INPUT_PATH_KEYS.isdisjoint(tool_input):  # a command or a query: no path keys
        return paths
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            paths.append(value)
    for key in _PATH_LIST_KEYS:
        values = tool_input.get(key)
        if isinstance(values, list):
            paths.extend(value for value in values if isinstance(value, str) and value.strip())
    return paths


def _argument(tool_input: Mapping[str, Any]) -> str:
    """The one argument that best says what a call did: a path, a command or a query."""
    for key in _ARGUMENT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return compact_json(tool_input) if tool_input else ""


def _first_line(text: str) -> str:
    """`first_nonblank_line(text)`, quicker when the text starts with a printable line."""
    if text and not text[0].isspace():
        end = text.find("\n")
        line = text if end < 0 else text[:end]
        if line.isprintable():  # no line break in it: they are all unprintable
            return line
    return first_nonblank_line(text)


def _single_spaced(text: str) -> bool:
    """True when `" ".join(text.split()) == text`: its only whitespace is single spaces
    between words (in a printable text every whitespace character but the space is
    unprintable)."""
    return (
        text.isprintable()
        and "  " not in text
        and not text.startswith(" ")
        and not text.endswith(" ")
    )


def _error_line(text: str, first: str) -> str:
    """The line that names the error: the last `...Error:` line of a traceback, else the
    first non-blank one, `first` (`first_nonblank_line(text)`)."""
    for line in reversed(text.splitlines()):  # the last named line is near the end
        if ("Error" in line or "Exception" in line) and _ERROR_NAME.match(line):
            return line  # not blank: it holds a name
    return first


class ExtractiveSummarizer:
    """Deterministic structured summaries without a model (the offline default)."""

    name: Final = "extractive"

    def __init__(self, *, line_chars: int = 300) -> None:
        self.line_chars = line_chars

    def summarize(self, request: SummaryRequest) -> str:
        """The summary of `request.messages`, within `request.max_tokens` tokens."""
        collector = _Collector(self.line_chars)
        for order, message in enumerate(request.messages):
            collector.message(order, message)
        collector.finish()
        lines = beside_state(dedupe(collector.lines), request.state_block)
        return fit(
            lines,
            request.max_tokens,
            request.encoding,
            collector.dropped,
            required=request.required_identifiers,
        )
