"""The retention check: which identifiers a history mentions, and how many survive compaction.

`extract_identifiers` collects, in order of appearance and without repeats:
- file paths and URLs written in user/assistant text or in the strings of tool inputs that
  locate something (paths, commands, URLs: `tool_operations.locator_strings`; not the content
  a call writes, whose import specifiers and fixture names are no file the agent touched, nor
  tool output, where listings and logs would flood the list); a path has a slash and either
  an explicit start (`/`, `./`, `../`, `~/`) or a file extension, or is a bare name with a
  common source/config extension (`models.py`);
- the names of tools whose calls failed (`is_error` results);
- error lines (a `...Error`/`...Exception` name, `Traceback`, `FAILED`, `failed`, `error:`)
  from tool results and user text, trimmed to 200 characters, at most 3 per block; code lines
  of file views (line-numbered) and lines that raise or catch are not errors;
- the first line of each real user request (rounds, see `messages.starts_round`), harness
  boilerplate aside (`harness_text`: a caveat or a `<command-name>` is no request);
- open TODO items: `- [ ] ...` and `TODO: ...` lines, and pending todo-list entries of a
  tool input (`{"todos": [{"content": ..., "status": "pending"}]}`).

`measure_recall` says which of them still appear verbatim in a (compacted) history's text,
tool inputs included.

Both run on every compaction over the whole middle, so the history is walked once, each
regex runs only where its required literal is (a `/` for paths, `://` for URLs, an error
word for error lines), a word already matched anywhere in the history is not matched again,
nor a long tool result met before (a file read again) searched for error lines again, and
recall first rules out identifiers whose whitespace-delimited words the text lacks before
searching for the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .harness_text import strip_harness
from .marked_words import marked_words
from .messages import (
    blocks_of,
    first_nonblank_line,
    is_meta,
    is_summary_message,
    starts_round,
    tool_result_text,
)
from .recall import measure_recall, recall_around
from .tool_operations import locator_strings

__all__ = ["extract_identifiers", "measure_recall", "recall_around"]

_MAX_LINE: Final = 200
_ERRORS_PER_BLOCK: Final = 3
_URL: Final = re.compile(r"\bhttps?://[^\s<>()\[\]{}\"'`]+")
_PATH: Final = re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+")
_BARE_FILE: Final = re.compile(
    r"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|jsx|ts|tsx|mjs|go|rs|java|c|h|cc|cpp|"
    r"hpp|cs|rb|php|md|rst|txt|json|yaml|yml|toml|ini|cfg|sh|html|css|scss|sql|xml|csv|lock|"
    r"env|ipynb|gradle|kt|swift|vue|svelte)\b"
)
#: A word no match of `_BARE_FILE` starts inside (after a character the pattern looks behind
#: for): one can start it only, and holds no `/`.
_PLAIN_PATH: Final = re.compile(r"[\w/.-]+")
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
#: Each of `_ERROR_WORDS`, matched at its first letter, or for `error:` at its colon: the
#: regex engine tries a match at each character that can start one, and these are rarer
#: than the `e` of `error:` (`failed`'s `f` too, against its `a`). The match lies inside
#: the error word, which holds no whitespace and no other error word's start.
_ERROR_HINT: Final = re.compile(r"Error|Exception|Traceback|FAILED|f(?=ailed)|:(?<=error:)")
_TODO: Final = re.compile(r"^\s*(?:[-*]\s+\[ \]\s+\S.*|.*\bTODO:\s*\S.*)$", re.MULTILINE)
_OPEN_STATUSES: Final = frozenset({"pending", "in_progress"})
_TEXT_ROLES: Final = frozenset({"user", "assistant"})
#: How many distinct words a walk remembers as matched (bounds its memory).
_REMEMBERED_WORDS: Final = 1 << 16
#: Tool results this long are searched for error lines once per walk (`_Scan`); a walk
#: remembers this many of them at most (it holds the texts, not copies).
_REPEAT_MIN: Final = 1024
_REMEMBERED_RESULTS: Final = 1 << 12
#: Line breaks of str.splitlines besides "\n".
_OTHER_BREAK: Final = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def extract_identifiers(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The identifiers a history mentions (module doc), deduplicated, in order."""
    scan = _Scan()
    for message in messages:
        scan.message(message)
    return list(scan.found)


class _Scan:
    """One walk over a history: the identifiers found so far, in order (`found`).

    A text's paths, URLs and file names are found word by word, and what a word gives depends
    on the word alone: a word met before (in any text) gives nothing new, so only the words
    not in `words` yet are matched. Likewise a tool result's error lines depend on its text
    alone: a long result met before (a file read again, the same log) gives nothing new, so
    only the results not in `results` yet are searched."""

    def __init__(self) -> None:
        self.found: dict[str, None] = {}
        self.words: set[str] = set()
        self.results: set[str] = set()  # the long tool result texts searched so far
        # Tool names by id of the previous message's calls (a result answers those only: ids
        # may repeat across turns).
        self.asked: dict[str, str] = {}

    def add(self, identifier: str) -> None:
        identifier = identifier.strip()
        if identifier and identifier not in self.found:
            self.found[identifier] = None

    def message(self, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        content = message.get("content")
        calls: dict[str, str] = {}
        if isinstance(content, str):  # one text block: `starts_round` without its walk
            if role == "user" and not is_meta(message) and not is_summary_message(message):
                self.add(_first_line(content))
            if role in _TEXT_ROLES:
                self.text(content, role == "user")
        elif isinstance(content, list):
            # One tool result (the commonest user message) starts no round: not asked.
            answer = len(content) == 1 and _is_tool_result(content[0])
            if role == "user" and not answer and starts_round(message):
                self.add(_first_line(_plain_text(message)))
            for block in content:
                if isinstance(block, dict):
                    self.block(block, role, calls)
        self.asked = calls

    def block(self, block: dict[str, Any], role: Any, calls: dict[str, str]) -> None:
        kind = block.get("type")
        if kind == "text" and role in _TEXT_ROLES:
            self.text(str(block.get("text") or ""), role == "user")
        elif kind == "tool_use":
            calls[str(block.get("id"))] = str(block.get("name") or "")
            arguments = block.get("input")
            for text in locator_strings(arguments):
                self.text(text, False)
            if not isinstance(arguments, dict) or "todos" in arguments:  # the usual input: none
                for entry in _open_todo_entries(arguments):
                    self.add(entry)
        elif kind == "tool_result":
            self.result(block)

    def result(self, block: dict[str, Any]) -> None:
        """The failed call's tool name and the error lines of a tool result block."""
        if block.get("is_error"):
            name = self.asked.get(str(block.get("tool_use_id")))
            if name:
                self.add(name)
        content = block.get("content")
        text = content if isinstance(content, str) else tool_result_text(content)
        if len(text) >= _REPEAT_MIN:
            if text in self.results:  # its error lines are found already
                return
            if len(self.results) > _REMEMBERED_RESULTS:  # a cache: forgetting costs time only
                self.results.clear()
            self.results.add(text)
        for line in _error_lines(text):
            self.add(line)

    def text(self, text: str, errors: bool) -> None:
        """References and open TODOs of `text`, and its error lines when `errors`."""
        words = marked_words(text)  # only a word with a `/` or a `.` can give something
        if not self.words.issuperset(words):
            fresh = set(words).difference(self.words)
            if len(self.words) > _REMEMBERED_WORDS:  # a cache: forgetting costs time only
                self.words.clear()
            self.words.update(fresh)
            marked = list(fresh)
            if len(marked) > 1:  # in the order of the text
                marked = [word for word in dict.fromkeys(words) if word in fresh]
            for reference in _references(marked):
                self.add(reference)
        if "[ ]" in text or "TODO:" in text:  # the pattern's two literals
            for match in _TODO.finditer(text):
                self.add(match.group().strip()[:_MAX_LINE])
        if errors:
            for line in _error_lines(text):
                self.add(line)


def _references(words: Sequence[str]) -> list[str]:
    """The URLs in `words` (a text's whitespace-delimited words), then the paths and file names
    in what is left of them, in order.

    No match of a pattern spans whitespace, and each looks behind at most at a character that
    whitespace would equally fail, so matching word by word finds what matching the text
    finds; a URL is cut out of its word, and what is left of the word is words again."""
    found: list[str] = []
    rest = words
    if "://" in " ".join(words):  # no "://" spans two words
        rest = []
        for word in words:
            if "://" in word:
                found.extend(match.group().rstrip(".,;:!?") for match in _URL.finditer(word))
                rest.extend(_URL.sub(" ", word).split())
            else:
                rest.append(word)
    plain: set[str] = set()  # words of path characters only (a file name starts them only)
    for word in rest:
        if "/" in word:
            for match in _PATH.finditer(word):
                whole = match.group()
                path = whole.rstrip(".,;:!?")
                if path.startswith(("/", "./", "../", "~/")) or _EXTENSION.search(path):
                    found.append(path)
                if len(whole) == len(word) and _PLAIN_PATH.fullmatch(word):
                    plain.add(word)
    for word in rest:
        if "." in word and (word not in plain or "." in word[: word.find("/")]):
            found.extend(match.group() for match in _BARE_FILE.finditer(word))
    return found


def _error_lines(text: str) -> list[str]:
    """Up to 3 error lines (as str.splitlines cuts them), in order.

    Every match of the error pattern holds one of `_ERROR_WORDS`, so only the lines holding
    one are tested: each is cut out around such a word, between two "\n" (split again when
    it holds another line break)."""
    if not (
        "Error" in text
        or "Exception" in text
        or "Traceback" in text
        or "FAILED" in text
        or "failed" in text
        or "error:" in text
    ):
        return []
    found: list[str] = []
    position = 0
    search = _ERROR_HINT.search
    while (hint := search(text, position)) is not None:
        start = text.rfind("\n", 0, hint.start()) + 1
        position = text.find("\n", hint.end()) + 1 or len(text) + 1
        line = text[start : position - 1]
        if line.isprintable() or _OTHER_BREAK.search(line) is None:
            first = hint.start() - start
            if _is_error(line, first, found) and len(found) == _ERRORS_PER_BLOCK:
                return found
            continue
        for part in line.splitlines():
            if (
                (inside := search(part))
                and _is_error(part, inside.start(), found)
                and len(found) == _ERRORS_PER_BLOCK
            ):
                return found
    return found


def _is_error(line: str, first: int, found: list[str]) -> bool:
    """Appends `line`, stripped and trimmed, to `found` when it is an error line.

    `first`: a position inside its first error word (`_ERROR_HINT`). A match of the error
    pattern holds one and starts at the start of a word (of `\\w` characters) or at the
    error word, so it is searched from the last space before `first`; whitespace around the
    line changes no word boundary, so the unstripped line has the same matches as the
    stripped one."""
    stripped = line.strip()
    if stripped == _GENERIC_TRACEBACK or _NOT_ERROR.match(line):
        return False
    if not _ERROR.search(line, line.rfind(" ", 0, first) + 1):
        return False
    found.append(stripped[:_MAX_LINE])
    return True


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


def _is_tool_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _first_line(text: str) -> str:
    """The first line of a request: the person's words, harness boilerplate aside."""
    return first_nonblank_line(strip_harness(text)).strip()[:_MAX_LINE]


def _plain_text(message: Mapping[str, Any]) -> str:
    return "\n".join(
        str(block.get("text") or "") for block in blocks_of(message) if block.get("type") == "text"
    )
