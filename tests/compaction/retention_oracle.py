"""Test oracle: compaction/retention.py as of 9b6c383 (before the one-pass rewrite), kept
verbatim so the equivalence tests compare the fast code with it, but for issue 27's two
changes of definition: a tool input's identifiers come from its locator strings
(`tool_operations.locator_strings`), and a request's first line leaves harness boilerplate
aside (`harness_text.strip_harness`).

The retention check: which identifiers a history mentions, and how many survive compaction.

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

Both run on every compaction over the whole middle, so each regex runs only on texts that
hold its required literal (a `/` for paths, `://` for URLs, ...), and recall first rules out
identifiers whose whitespace-delimited words the text lacks before searching for the rest.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from itertools import accumulate
from typing import Any, Final

from compaction.harness_text import strip_harness
from compaction.messages import (
    blocks_of,
    first_nonblank_line,
    message_text,
    starts_round,
    tool_result_text,
)
from compaction.tool_operations import locator_strings

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
#: A literal each match of `_ERROR` contains.
_ERROR_WORDS: Final = ("Error", "Exception", "Traceback", "FAILED", "failed", "error:")
_ERROR_HINT: Final = re.compile("|".join(_ERROR_WORDS))
_TODO: Final = re.compile(r"^\s*(?:[-*]\s+\[ \]\s+\S.*|.*\bTODO:\s*\S.*)$", re.MULTILINE)
_OPEN_STATUSES: Final = frozenset({"pending", "in_progress"})
#: Line breaks of str.splitlines besides "\n".
_OTHER_BREAK: Final = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


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
    words = _Words(haystack)
    missing = [identifier for identifier in identifiers if not words.holds(identifier)]
    return (len(identifiers) - len(missing)) / len(identifiers), missing


class _Words:
    """The whitespace-delimited words of a text, to rule out absent identifiers cheaply.

    Where an identifier occurs, each of its words with whitespace on both sides inside the
    identifier is a whole word of the text, and three such words in a row are three words
    in a row of the text; a word with whitespace only before it starts a word of the text,
    one with whitespace only after it ends one. An identifier of one word (a path, a URL)
    lies inside one word of the text, so it is searched among the text's words that hold
    its `/` or `.` only.
    """

    AFFIX: Final = 4

    def __init__(self, text: str) -> None:
        self.text = text
        self.words = text.split()
        self.whole = set(self.words)
        self._holding: dict[str, str] = {}

    @cached_property
    def triples(self) -> set[tuple[str, str, str]]:
        return set(zip(self.words, self.words[1:], self.words[2:], strict=False))

    @cached_property
    def starts(self) -> set[str]:
        return {word[: self.AFFIX] for word in self.whole if len(word) >= self.AFFIX}

    @cached_property
    def ends(self) -> set[str]:
        return {word[-self.AFFIX :] for word in self.whole if len(word) >= self.AFFIX}

    def holds(self, identifier: str) -> bool:
        """True when `identifier` occurs verbatim in the text."""
        parts = identifier.split()
        if len(parts) == 1 and len(parts[0]) == len(identifier):
            for mark in ("/", "."):
                if mark in identifier:
                    return identifier in self._words_holding(mark)
            return identifier in self.text
        return self._may_hold(identifier, parts) and identifier in self.text

    def _words_holding(self, mark: str) -> str:
        """The distinct words that hold `mark`, one a line."""
        if mark not in self._holding:
            self._holding[mark] = "\n".join({word for word in self.whole if mark in word})
        return self._holding[mark]

    def _may_hold(self, identifier: str, parts: list[str]) -> bool:
        """False only when `identifier` (split into `parts`) cannot occur in the text."""
        if not parts:
            return True
        first = 0 if identifier[0].isspace() else 1
        last = len(parts) if identifier[-1].isspace() else len(parts) - 1
        bounded = parts[first:last]  # whitespace on both sides
        if len(bounded) >= 3:  # each word is in a triple: checking the triples is enough
            triples = self.triples
            for index in range(len(bounded) - 2):
                if (bounded[index], bounded[index + 1], bounded[index + 2]) not in triples:
                    return False
        elif any(part not in self.whole for part in bounded):
            return False
        if first == 1 and len(parts) > 1 and not self._ends_a_word(parts[0]):
            return False
        return not (last < len(parts) and len(parts) > 1 and not self._starts_a_word(parts[-1]))

    def _ends_a_word(self, part: str) -> bool:
        return len(part) < self.AFFIX or part[-self.AFFIX :] in self.ends

    def _starts_a_word(self, part: str) -> bool:
        return len(part) < self.AFFIX or part[: self.AFFIX] in self.starts


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
            for text in locator_strings(arguments):
                yield from _references(text)
                yield from _todos(text)
            yield from _open_todo_entries(arguments)
        elif kind == "tool_result":
            if block.get("is_error"):
                name = asked.get(str(block.get("tool_use_id")))
                if name:
                    yield name
            yield from _error_lines(tool_result_text(block.get("content")))


def _references(text: str) -> Iterator[str]:
    """URLs first, then the paths in what is left of the text.

    Each pattern needs a literal (`://`, `/`, `.`): texts without it skip that pattern. A
    path holds no whitespace and its pattern looks behind for a non-space, so matching
    each whitespace-delimited word that holds the literal finds the same paths, in order,
    without scanning the words that cannot hold one; a repeated word only repeats what its
    first occurrence found, and `extract_identifiers` keeps first occurrences only."""
    rest = text
    if "://" in text:
        for match in _URL.finditer(text):
            yield match.group().rstrip(".,;:!?")
        rest = _URL.sub(" ", text)
    # A word seen earlier in the text yields nothing new (identifiers are deduplicated).
    words = list(dict.fromkeys(rest.split())) if "/" in rest or "." in rest else []
    for word in [word for word in words if "/" in word]:
        for match in _PATH.finditer(word):
            path = match.group().rstrip(".,;:!?")
            if path.startswith(("/", "./", "../", "~/")) or _EXTENSION.search(path):
                yield path
    for word in [word for word in words if "." in word]:
        for match in _BARE_FILE.finditer(word):
            yield match.group()


def _error_lines(text: str) -> Iterator[str]:
    """Up to 3 error lines, in order. Every match of the error pattern holds one of
    `_ERROR_WORDS`, so only the lines holding one are tested, found with plain substring
    searches first and a literal-only pattern next (both much faster than the pattern)."""
    if not any(word in text for word in _ERROR_WORDS):
        return
    taken = 0
    for line in _hinted_lines(text):
        stripped = line.strip()
        if stripped == _GENERIC_TRACEBACK or _NOT_ERROR.match(line):
            continue
        if _ERROR.search(stripped):
            yield stripped[:_MAX_LINE]
            taken += 1
            if taken == _ERRORS_PER_BLOCK:
                return


def _hinted_lines(text: str) -> Iterator[str]:
    """Each line (as str.splitlines gives them) holding an `_ERROR_HINT`, once, in order.

    With "\n" as the only line break, each line is cut out around its hint; otherwise the
    text is split once."""
    if _OTHER_BREAK.search(text) is None:
        after = 0  # where the line after the last one given starts
        for hint in _ERROR_HINT.finditer(text):
            if hint.start() < after:
                continue
            start = text.rfind("\n", 0, hint.start()) + 1
            end = text.find("\n", hint.start())
            after = len(text) if end < 0 else end + 1
            yield text[start : after if end < 0 else end]
        return
    lines: list[str] = []
    ends: list[int] = []
    previous = -1
    for hint in _ERROR_HINT.finditer(text):
        if not lines:
            lines = text.splitlines()
            ends = list(accumulate(len(line) for line in text.splitlines(keepends=True)))
        index = bisect_right(ends, hint.start())
        if index != previous:
            previous = index
            yield lines[index]


def _todos(text: str) -> Iterator[str]:
    if "[ ]" not in text and "TODO:" not in text:  # the pattern's two literals
        return
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
    return first_nonblank_line(strip_harness(text)).strip()[:_MAX_LINE]


def _plain_text(message: Mapping[str, Any]) -> str:
    return "\n".join(
        str(block.get("text") or "") for block in blocks_of(message) if block.get("type") == "text"
    )


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
