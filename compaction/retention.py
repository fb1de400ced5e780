"""The retention check: which identifiers a history mentions, and how many survive compaction.

`extract_identifiers` collects, in order of appearance and without repeats:
- file paths and URLs written in user/assistant text or in tool inputs (not in tool output,
  where listings and logs would flood the list); a path has a slash and either an explicit
  start (`/`, `./`, `../`, `~/`) or a file extension, or is a bare name with a common
  source/config extension (`models.py`);
- the names of tools whose calls failed (`is_error` results);
- error lines (a `...Error`/`...Exception` name, `Traceback`, `FAILED`, `failed`, `error:`)
  from tool results and user text, trimmed to 200 characters, at most 3 per block; code lines
  of file views (line-numbered) and lines that raise or catch are not errors;
- the first line of each real user request (rounds, see `messages.starts_round`);
- open TODO items: `- [ ] ...` and `TODO: ...` lines, and pending todo-list entries of a
  tool input (`{"todos": [{"content": ..., "status": "pending"}]}`).

`measure_recall` says which of them still appear verbatim in a (compacted) history's text,
tool inputs included.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .messages import blocks_of, message_text, starts_round

__all__ = ["extract_identifiers", "measure_recall"]

_MAX_LINE: Final = 200
_ERRORS_PER_BLOCK: Final = 3
_URL: Final = re.compile(r"\bhttps?://[^\s<>()\[\]{}\"'`]+")
_PATH: Final = re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+")
_BARE_FILE: Final = re.compile(
    r"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|jsx|ts|tsx|mjs|go|rs|java|c|h|cc|cpp|"
    r"hpp|cs|rb|php|md|rst|txt|json|yaml|yml|toml|ini|cfg|sh|html|css|scss|sql|xml|csv|lock|"
    r"env|ipynb|gradle|kt|swift|vue|svelte)\b"
)
_EXTENSION: Final = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_ERROR: Final = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\bfailed\b|\berror:",
)
_NOT_ERROR: Final = re.compile(
    r"^\s*(?:\d+(?:→|\t)|(?:raise|except|throw|catch|class|def|import|from)\b|#|//)"
)
_GENERIC_TRACEBACK: Final = "Traceback (most recent call last):"
_TODO: Final = re.compile(r"^\s*(?:[-*]\s+\[ \]\s+\S.*|.*\bTODO:\s*\S.*)$", re.MULTILINE)
_OPEN_STATUSES: Final = frozenset({"pending", "in_progress"})


def extract_identifiers(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The identifiers a history mentions (module doc), deduplicated, in order."""
    found: dict[str, None] = {}
    # Tool names by id of the previous message's calls (a result answers those only: ids
    # may repeat across turns).
    asked: dict[str, str] = {}
    for message in messages:
        calls: dict[str, str] = {}
        for identifier in _message_identifiers(message, asked, calls):
            identifier = identifier.strip()
            if identifier:
                found.setdefault(identifier, None)
        asked = calls
    return list(found)


def measure_recall(
    identifiers: Sequence[str], messages: Sequence[Mapping[str, Any]]
) -> tuple[float, list[str]]:
    """The share of `identifiers` present verbatim in `messages`, and the missing ones.

    An empty list of identifiers has a recall of 1.0.
    """
    if not identifiers:
        return 1.0, []
    haystack = "\n".join(_searchable_texts(messages))
    missing = [identifier for identifier in identifiers if identifier not in haystack]
    return (len(identifiers) - len(missing)) / len(identifiers), missing


def _message_identifiers(
    message: Mapping[str, Any], asked: Mapping[str, str], calls: dict[str, str]
) -> Iterator[str]:
    """The identifiers of one message; its tool names go into `calls` by id."""
    role = message.get("role")
    if starts_round(message):
        first = _first_line(_plain_text(message))
        if first:
            yield first
    for block in blocks_of(message):
        kind = block.get("type")
        if kind == "text" and role in {"user", "assistant"}:
            text = str(block.get("text") or "")
            yield from _references(text)
            yield from _todos(text)
            if role == "user":
                yield from _error_lines(text)
        elif kind == "tool_use":
            calls[str(block.get("id"))] = str(block.get("name") or "")
            arguments = block.get("input")
            for text in _strings(arguments):
                yield from _references(text)
                yield from _todos(text)
            yield from _open_todo_entries(arguments)
        elif kind == "tool_result":
            if block.get("is_error"):
                name = asked.get(str(block.get("tool_use_id")))
                if name:
                    yield name
            yield from _error_lines(_result_text(block.get("content")))


def _references(text: str) -> Iterator[str]:
    """URLs first, then the paths in what is left of the text."""
    for match in _URL.finditer(text):
        yield match.group().rstrip(".,;:!?")
    rest = _URL.sub(" ", text)
    for match in _PATH.finditer(rest):
        path = match.group().rstrip(".,;:!?")
        if path.startswith(("/", "./", "../", "~/")) or _EXTENSION.search(path):
            yield path
    for match in _BARE_FILE.finditer(rest):
        yield match.group()


def _error_lines(text: str) -> Iterator[str]:
    taken = 0
    for line in text.splitlines():
        if taken == _ERRORS_PER_BLOCK:
            return
        stripped = line.strip()
        if stripped == _GENERIC_TRACEBACK or _NOT_ERROR.match(line):
            continue
        if _ERROR.search(stripped):
            taken += 1
            yield stripped[:_MAX_LINE]


def _todos(text: str) -> Iterator[str]:
    for match in _TODO.finditer(text):
        yield match.group().strip()[:_MAX_LINE]


def _open_todo_entries(arguments: Any) -> Iterator[str]:
    todos = arguments.get("todos") if isinstance(arguments, Mapping) else None
    if not isinstance(todos, list):
        return
    for todo in todos:
        if isinstance(todo, Mapping) and todo.get("status") in _OPEN_STATUSES:
            content = todo.get("content")
            if isinstance(content, str):
                yield content.strip()[:_MAX_LINE]


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:_MAX_LINE]
    return ""


def _plain_text(message: Mapping[str, Any]) -> str:
    return "\n".join(
        str(block.get("text") or "") for block in blocks_of(message) if block.get("type") == "text"
    )


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "")
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return ""


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (tool inputs), keys excluded."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _searchable_texts(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    for message in messages:
        yield message_text(message)
        for block in blocks_of(message):
            if block.get("type") == "tool_use":
                yield str(block.get("name") or "")
                yield from _strings(block.get("input"))
