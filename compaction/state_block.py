"""The state block of a summary: the carried state written within a token budget, and read
back (docs/behaviour.md#what-a-summary-always-keeps).

The block sits between `STATE_OPEN` and `STATE_CLOSE` lines at the end of every summary's
text. When it does not fit, it shrinks in steps, the state's facts last: first the files of
one directory with the same operation share a line with a brace group
(`src/components/{TodoItem,TodoList,AddTodo}.tsx: written`), then the operations and all but
the latest request go and requests are cut shorter, and only then are the oldest files and
errors left out, with a line saying how many (an error only when no file is left to drop).
The todo list is never cut.
`expand_path_groups` turns brace groups back into whole paths, so every path the block holds
is found whole by recall and by the grounding check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from .carried_state import (
    STATE_CLOSE,
    STATE_OPEN,
    CarriedState,
    FileTouch,
    expand_path_groups,
)
from .harness_text import clip_words
from .summarizers.summary_merge import GOALS, parse_summary
from .tokens import text_counter

__all__ = ["expand_path_groups", "parse_state_block", "render_state", "state_from_sections"]

_FIRST: Final = "First request: "
_LATEST: Final = "Latest requests:"
_TODOS: Final = "Todo list:"
_ERRORS: Final = "Unresolved errors:"
_FILES: Final = 'Files touched (last operation; "in tail": also in the messages below):'
_HEADINGS: Final = (_LATEST, _TODOS, _ERRORS, _FILES)
_IN_TAIL: Final = ", in tail"
_LEFT_OUT: Final = re.compile(r"^- \((\d+) older (?:files?|errors?) left out for space\)$")
_FILE_LINE: Final = re.compile(r"^- (?P<paths>\S+?)(?:: (?P<op>[a-z]+)(?P<tail>, in tail)?)?$")
_UNGROUPABLE: Final = re.compile(r"[\s{},]")
_SHORT_REQUEST: Final = 120


@dataclass(frozen=True)
class _Level:
    """How much of the state a rendering shows."""

    grouped: bool  # files of a directory share a line
    operations: bool  # each line says its files' last operation
    requests: int  # how many of the latest requests
    request_chars: int | None  # each request cut to this many characters


_LEVELS: Final = (
    _Level(grouped=False, operations=True, requests=2, request_chars=None),
    _Level(grouped=True, operations=True, requests=2, request_chars=None),
    _Level(grouped=True, operations=False, requests=1, request_chars=_SHORT_REQUEST),
)


def render_state(state: CarriedState, max_tokens: int, encoding: str | None = None) -> str:
    """The state block of `state` within `max_tokens` (module doc); "" for an empty state."""
    if state.is_empty():
        return ""
    count = text_counter(encoding)
    for level in _LEVELS:
        text = _render(state, level)
        if count(text) <= max_tokens:
            return text
    return _shortened(state, _LEVELS[-1], max_tokens, count)


def _shortened(
    state: CarriedState, level: _Level, max_tokens: int, count: Callable[[str], int]
) -> str:
    """The block with the most of the newest files that fits (a bisection); the errors (a
    few lines) go, oldest first, only when no file is left to drop."""
    low, high = 0, len(state.files)  # files kept: `low` fits (or nothing does)
    errors = state.errors
    while errors and count(_render(state, level, 0, errors)) > max_tokens:
        errors = errors[1:]
    while low < high:
        middle = (low + high + 1) // 2
        text = _render(state, level, middle, errors)
        if count(text) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return _render(state, level, low, errors)


def _render(
    state: CarriedState,
    level: _Level,
    files: int | None = None,
    errors: Sequence[str] | None = None,
) -> str:
    kept_files = state.files if files is None else state.files[len(state.files) - files :]
    kept_errors = state.errors if errors is None else errors
    lines = [STATE_OPEN]
    if state.first_request:
        lines.append(_FIRST + _cut(state.first_request, level.request_chars))
    first = state.first_request
    requests = [r for r in state.requests if not first.startswith(r.removesuffix(" …"))]
    requests = requests[-level.requests :]
    if requests:
        lines += [_LATEST, *(f"- {_cut(text, level.request_chars)}" for text in requests)]
    if state.todos:
        lines += [_TODOS, *(f"- {todo}" for todo in state.todos)]
    if kept_errors:
        lines += [_ERRORS, *(f"- {error}" for error in kept_errors)]
        if len(kept_errors) < len(state.errors):
            lines.append(_left_out(len(state.errors) - len(kept_errors), "error"))
    if state.files:
        lines += [_FILES, *_file_lines(kept_files, level)]
        if len(kept_files) < len(state.files):
            lines.append(_left_out(len(state.files) - len(kept_files), "file"))
    lines.append(STATE_CLOSE)
    return "\n".join(lines)


def _cut(text: str, chars: int | None) -> str:
    return text if chars is None else clip_words(text, chars)


def _left_out(count: int, what: str) -> str:
    return f"- ({count} older {what}{'' if count == 1 else 's'} left out for space)"


def _file_lines(files: Sequence[FileTouch], level: _Level) -> Iterator[str]:
    """One line per file, or per group of files (module doc)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for touch in files:
        suffix = f": {touch.operation}{_IN_TAIL if touch.in_tail else ''}"
        suffix = suffix if level.operations else ""
        if not level.grouped or _UNGROUPABLE.search(touch.path):
            yield f"- {touch.path}{suffix}"
            continue
        folder, _, name = touch.path.rpartition("/")
        key = (f"{folder}/" if "/" in touch.path else "", suffix)
        groups.setdefault(key, []).append(name)
    for (folder, suffix), names in groups.items():
        yield f"- {folder}{_brace(names)}{suffix}"


def _brace(names: list[str]) -> str:
    """`{a,b}.ext` for names that share an extension, `{a.py,b.md}` otherwise; one name as is."""
    unique = list(dict.fromkeys(names))
    if len(unique) == 1:
        return unique[0]
    stems = [name.rpartition(".") for name in unique]
    extensions = {extension for stem, dot, extension in stems if dot and stem}
    if len(extensions) == 1 and all(dot and stem for stem, dot, _ in stems):
        return "{" + ",".join(stem for stem, _, _ in stems) + "}." + extensions.pop()
    return "{" + ",".join(unique) + "}"


def parse_state_block(text: str) -> CarriedState | None:
    """The state a summary's block holds (the file operations it shows); None without one."""
    start = text.find(STATE_OPEN)
    if start < 0:
        return None
    end = text.find(STATE_CLOSE, start)
    body = text[start + len(STATE_OPEN) : end if end >= 0 else len(text)]
    first, section = "", ""
    parts: dict[str, list[str]] = {heading: [] for heading in _HEADINGS}
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(_FIRST):
            first = line.removeprefix(_FIRST)
        elif line in _HEADINGS:
            section = line
        elif section and line.startswith("- ") and not _LEFT_OUT.match(line):
            parts[section].append(line.removeprefix("- "))
    return CarriedState(
        first_request=first,
        requests=tuple(parts[_LATEST]),
        files=tuple(_parsed_files(parts[_FILES])),
        todos=tuple(parts[_TODOS]),
        errors=tuple(parts[_ERRORS]),
    )


def _parsed_files(lines: list[str]) -> Iterator[FileTouch]:
    for line in lines:
        match = _FILE_LINE.match(f"- {line}")
        if match is None:
            continue
        operation = match.group("op") or "touched"
        for path in expand_path_groups(match.group("paths")).split():
            yield FileTouch(path, operation)


def state_from_sections(text: str) -> CarriedState:
    """What a summary without a state block lists (one written before states were carried,
    or by a caller): the files of its file section, its todo items and its first request."""
    parsed = parse_summary(text)
    goals = parsed.lines.get(GOALS, [])
    asked = "- User asked: "
    first = goals[0].removeprefix(asked) if goals and goals[0].startswith(asked) else ""
    files = tuple(FileTouch(path, (ops or ["touched"])[-1]) for path, ops in parsed.files)
    todos = tuple(todo.removeprefix("- ") for todo in parsed.todos)
    return CarriedState(first_request=first, files=files, todos=todos)
