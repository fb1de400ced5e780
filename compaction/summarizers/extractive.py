"""`ExtractiveSummarizer`: the offline default. No model: a deterministic, structured summary
built from the messages themselves, in the sections of the LLM prompt.

It collects user requests, file operations (from tool inputs and paths in the text), tool
calls with their outcomes, errors and what followed them, open items (todo lists, TODO
lines) and the content of earlier summaries (merged into the sections, not nested).
Identifiers are copied verbatim. The result fits `max_tokens` (tiktoken): each section has
a share of the budget, newest lines first, and what one section leaves is given to the rest
by priority.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..messages import SUMMARY_PREFIX, blocks_of, is_meta, is_summary_message, message_text
from ..tokens import compact_json, get_encoding
from .base import SummaryRequest
from .prompt import SECTIONS

__all__ = ["KEY_IDENTIFIERS", "ExtractiveSummarizer"]

GOALS, FILES, TOOLS, STATE, ERRORS = SECTIONS
#: Heading of the section that lists identifiers the retention check asked to keep.
KEY_IDENTIFIERS: Final = "Key identifiers"

#: Share of the budget each section may fill before leftovers are shared out.
_SHARES: Final = {GOALS: 0.3, FILES: 0.2, TOOLS: 0.2, STATE: 0.15, ERRORS: 0.15}
_PATH_KEYS: Final = ("file_path", "path", "filename", "file", "notebook_path", "target_file")
_PATH_LIST_KEYS: Final = ("paths", "files", "file_paths")
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
_HEADING: Final = re.compile(r"^\s*(?:#+\s*|\d+[.)]\s*)?(?P<title>[A-Za-z][\w ,&/-]*?)\s*:?\s*$")


@dataclass(frozen=True)
class _Line:
    section: str
    text: str
    priority: int  # lower is kept first
    order: int  # position in the span: newer lines are kept first within a priority


@dataclass
class _Call:
    name: str
    input: Mapping[str, Any]
    order: int


@dataclass
class _Collector:
    """Walks the messages once and gathers the summary lines."""

    line_chars: int
    lines: list[_Line] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)  # this message's, by id
    asked: dict[str, _Call] = field(default_factory=dict)  # the previous message's, by id
    files: dict[str, list[str]] = field(default_factory=dict)
    file_order: dict[str, int] = field(default_factory=dict)
    tool_counts: dict[str, list[int]] = field(default_factory=dict)  # name -> [calls, failed]
    open_errors: dict[str, int] = field(default_factory=dict)  # tool name -> line index
    todos: list[str] = field(default_factory=list)
    todo_order: int = 0
    latest_update: tuple[int, str] | None = None
    seen_request: bool = False

    def add(self, section: str, text: str, priority: int, order: int) -> None:
        self.lines.append(_Line(section, text, priority, order))

    def clip(self, text: str, share: float = 1.0) -> str:
        """`text` on one line, cut at a word boundary to `share` of line_chars."""
        text = " ".join(text.split())
        limit = max(20, int(self.line_chars * share))
        if len(text) <= limit:
            return text
        return text[:limit].rsplit(" ", 1)[0] + " …"

    def message(self, order: int, message: Mapping[str, Any]) -> None:
        # A result answers a call of the message right before it: ids may repeat across turns.
        self.asked, self.calls = self.calls, {}
        if is_summary_message(message):
            self.earlier_summary(order, message_text(message))
            return
        role = message.get("role")
        for block in blocks_of(message):
            kind = block.get("type")
            if kind == "text" and role == "user" and not is_meta(message):
                self.user_text(order, str(block.get("text", "")))
            elif kind == "text" and role == "assistant":
                self.assistant_text(order, str(block.get("text", "")))
            elif kind == "text" and role == "system":  # mid-conversation notes: paths, TODOs
                self.text_mentions(order, str(block.get("text", "")))
            elif kind == "tool_use":
                self.tool_use(order, block)
            elif kind == "tool_result":
                self.tool_result(order, block)

    def earlier_summary(self, order: int, text: str) -> None:
        section = GOALS
        for raw in text.removeprefix(SUMMARY_PREFIX).splitlines():
            line = raw.strip()
            heading = _HEADING.match(line)
            if heading and _section_named(heading.group("title")):
                section = _section_named(heading.group("title")) or section
                continue
            if not line or line.lstrip("- ").lower() in {"none", ""}:
                continue
            text_line = line if line.startswith("- ") else f"- {line}"
            if section == KEY_IDENTIFIERS:
                self.add(GOALS, text_line, 1, order)
            else:
                self.add(section, text_line, _SECTION_PRIORITY[section], order)

    def user_text(self, order: int, text: str) -> None:
        first = next((line for line in text.splitlines() if line.strip()), "")
        if first:
            priority = 2 if self.seen_request else 1
            self.seen_request = True
            self.add(GOALS, f"- User asked: {self.clip(first)}", priority, order)
        self.text_mentions(order, text)

    def assistant_text(self, order: int, text: str) -> None:
        first = next((line for line in text.splitlines() if line.strip()), "")
        if first:
            self.latest_update = (order, self.clip(first, 0.7))
        self.text_mentions(order, text)

    def text_mentions(self, order: int, text: str) -> None:
        if _TODO_LINE.search(text):
            for line in text.splitlines():
                if _TODO_LINE.search(line):
                    self.add(STATE, f"- Open item: {self.clip(line, 0.7)}", 2, order)
        for path in _paths_in(text):
            self.file(path, "mentioned", order)

    def tool_use(self, order: int, block: Mapping[str, Any]) -> None:
        name = str(block.get("name", "tool"))
        raw_input = block.get("input")
        tool_input: Mapping[str, Any] = raw_input if isinstance(raw_input, Mapping) else {}
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
        text = _result_text(block)
        first = next((line for line in text.splitlines() if line.strip()), "")
        failed = bool(block.get("is_error")) or bool(_ERROR_LINE.match(first))
        label = f"{name}({self.clip(argument, 0.4)})" if argument else name
        if failed:
            self.tool_counts.setdefault(name, [0, 0])[1] += 1
            error = self.clip(_error_line(text) or "(no message)", 0.7)
            self.add(TOOLS, f"- {label} → failed: {error}", 5, order)
            self.open_errors[name] = len(self.lines)
            self.add(ERRORS, f"- {label} failed: {error}", 2, order)
        else:
            outcome = f": {self.clip(first, 0.4)}" if first else ""
            self.add(TOOLS, f"- {label} → ok{outcome}", 5, order)
            self.fix(name, label)

    def fix(self, name: str, label: str) -> None:
        """A later success of a tool that failed: record it as the fix of that error."""
        index = self.open_errors.pop(name, None)
        if index is not None:
            line = self.lines[index]
            fixed = _Line(line.section, f"{line.text}; then {label} succeeded", 2, line.order)
            self.lines[index] = fixed

    def file(self, path: str, operation: str, order: int) -> None:
        operations = self.files.setdefault(path, [])
        self.file_order[path] = order
        if operation not in operations:
            operations.append(operation)

    def finish(self) -> None:
        """Lines that summarise the whole span: files, tool counts, current state."""
        for path, operations in self.files.items():
            shown = [op for op in operations if op != "mentioned"] or ["mentioned"]
            priority = 4 if shown == ["mentioned"] else 3
            self.add(FILES, f"- {path}: {', '.join(shown)}", priority, self.file_order[path])
        if self.tool_counts:
            counts = ", ".join(
                f"{name} x{calls}" + (f" ({failed} failed)" if failed else "")
                for name, (calls, failed) in sorted(
                    self.tool_counts.items(), key=lambda item: (-item[1][0], item[0])
                )
            )
            total = sum(calls for calls, _ in self.tool_counts.values())
            self.add(TOOLS, f"- {total} tool calls: {counts}", 1, -1)
        for todo in self.todos:
            self.add(STATE, todo, 1, self.todo_order)
        if self.latest_update:
            order, text = self.latest_update
            self.add(STATE, f"- Latest assistant update: {text}", 1, order)


_MISSES: Final = 50
_SECTION_PRIORITY: Final = {GOALS: 1, FILES: 3, TOOLS: 5, STATE: 1, ERRORS: 2, KEY_IDENTIFIERS: 0}


def _section_named(title: str) -> str | None:
    wanted = title.strip().lower()
    for section in (*SECTIONS, KEY_IDENTIFIERS):
        if section.lower() == wanted:
            return section
    return None


def _operation(name: str, tool_input: Mapping[str, Any]) -> str:
    """What a call does to the files it names: from its command's first word, else its name."""
    candidates = []
    command = tool_input.get("command")
    if isinstance(command, str) and command.strip():
        candidates.append(_words(command.split(maxsplit=1)[0]))
    candidates.append(_words(name))
    for words in candidates:
        for keys, operation in _OPERATIONS:
            if words & keys:
                return operation
    return "used"


def _words(text: str) -> set[str]:
    """Lowercase words of an identifier or command: `MultiEdit` -> {multi, edit}."""
    return set(re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower()))


def _paths_in(text: str) -> Iterable[str]:
    """File paths written in free text: words that look like `dir/name.ext` or `name.py`."""
    for word in text.split():
        if "/" in word or "." in word:
            candidate = word.strip(_EDGE_PUNCTUATION).rstrip(".")
            if _PATH_TOKEN.fullmatch(candidate):
                yield candidate


def _input_paths(tool_input: Mapping[str, Any]) -> Iterable[str]:
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            yield value
    for key in _PATH_LIST_KEYS:
        values = tool_input.get(key)
        if isinstance(values, list):
            yield from (value for value in values if isinstance(value, str) and value.strip())


def _argument(tool_input: Mapping[str, Any]) -> str:
    """The one argument that best says what a call did: a path, a command or a query."""
    for key in (*_PATH_KEYS, "command", "cmd", "query", "pattern", "url"):
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return compact_json(tool_input) if tool_input else ""


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(item.get("text", ""))
            for item in content
            if isinstance(item, Mapping) and item.get("type") == "text"
        )
    return ""


def _error_line(text: str) -> str:
    """The line that names the error: the last `...Error:` line of a traceback, else the first."""
    lines = [line for line in text.splitlines() if line.strip()]
    named = [line for line in lines if re.match(r"^\s*[\w.]*(?:Error|Exception)\b", line)]
    return named[-1] if named else (lines[0] if lines else "")


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
        lines = _dedupe(collector.lines)
        required = [
            _Line(KEY_IDENTIFIERS, f"- {identifier}", 0, index)
            for index, identifier in enumerate(request.required_identifiers)
        ]
        return _fit(required + lines, request.max_tokens, request.encoding)


def _dedupe(lines: Sequence[_Line]) -> list[_Line]:
    seen: dict[tuple[str, str], int] = {}
    kept: list[_Line] = []
    for line in lines:
        key = (line.section, line.text)
        if key in seen:  # keep the newest position of a repeated line
            previous = kept[seen[key]]
            kept[seen[key]] = _Line(
                line.section, line.text, min(line.priority, previous.priority), line.order
            )
            continue
        seen[key] = len(kept)
        kept.append(line)
    return kept


def _fit(lines: Sequence[_Line], max_tokens: int, encoding: str | None) -> str:
    """Render the lines that fit in `max_tokens`: key identifiers, per-section shares, then
    leftovers by priority. Lines are only encoded when they are considered."""
    encode = get_encoding(encoding).encode_ordinary
    costs: dict[int, int] = {}

    def cost(index: int) -> int:
        if index not in costs:
            costs[index] = len(encode(lines[index].text)) + 1
        return costs[index]

    sections = _rendered_sections(lines)
    fixed = sum(len(encode(f"{section}:\n- none\n")) for section in sections)
    budget = max_tokens - fixed
    ranked = sorted(range(len(lines)), key=lambda i: (lines[i].priority, -lines[i].order))
    chosen: set[int] = set()
    required = [i for i in ranked if lines[i].section == KEY_IDENTIFIERS]
    spent = _take(required, budget, cost, chosen)
    shared = budget - spent
    for section, share in _SHARES.items():
        candidates = [i for i in ranked if lines[i].section == section]
        spent += _take(candidates, int(shared * share), cost, chosen)
    spent += _take([i for i in ranked if i not in chosen], budget - spent, cost, chosen)
    text = _render(lines, chosen, sections)
    while chosen and len(encode(text)) > max_tokens:
        chosen.discard(max(chosen, key=lambda i: (lines[i].priority, -lines[i].order)))
        text = _render(lines, chosen, sections)
    return text


def _take(
    candidates: Sequence[int], allowance: int, cost: Callable[[int], int], chosen: set[int]
) -> int:
    """Choose candidates in order while they fit `allowance`; return the tokens used.

    Gives up after `_MISSES` candidates in a row that do not fit, so a long span costs a
    bounded number of encodes once its budget is nearly spent.
    """
    used = 0
    misses = 0
    for index in candidates:
        if allowance - used <= 1 or misses >= _MISSES:
            break
        if used + cost(index) <= allowance:
            chosen.add(index)
            used += cost(index)
            misses = 0
        else:
            misses += 1
    return used


def _rendered_sections(lines: Sequence[_Line]) -> list[str]:
    sections = list(SECTIONS)
    if any(line.section == KEY_IDENTIFIERS for line in lines):
        sections.append(KEY_IDENTIFIERS)
    return sections


def _render(lines: Sequence[_Line], chosen: set[int], sections: Sequence[str]) -> str:
    parts = []
    for section in sections:
        kept = sorted(
            (i for i in chosen if lines[i].section == section), key=lambda i: lines[i].order
        )
        body = "\n".join(lines[i].text for i in kept) or "- none"
        parts.append(f"{section}:\n{body}")
    return "\n\n".join(parts)
