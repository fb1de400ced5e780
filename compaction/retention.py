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

Both run on every compaction over the whole middle, so the history is walked once, each
regex runs only where its required literal is (a `/` for paths, `://` for URLs, an error
word for error lines), a word already matched anywhere in the history is not matched again,
and recall first rules out identifiers whose whitespace-delimited words the text lacks before
searching for the rest.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, Final

from .marked_words import marked_words
from .messages import (
    blocks_of,
    first_nonblank_line,
    is_meta,
    is_summary_message,
    message_text,
    starts_round,
    tool_result_text,
)

__all__ = ["extract_identifiers", "measure_recall", "recall_of"]

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
_TEXT_ROLES: Final = frozenset({"user", "assistant"})
#: How many distinct words a walk remembers as matched (bounds its memory).
_REMEMBERED_WORDS: Final = 1 << 16
#: The longest word of a compacted text whose suffixes recall lists (longer ones are searched).
_SHORT_WORD: Final = 64
#: Line breaks of str.splitlines besides "\n".
_OTHER_BREAK: Final = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def extract_identifiers(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The identifiers a history mentions (module doc), deduplicated, in order."""
    scan = _Scan()
    for message in messages:
        scan.message(message)
    return list(scan.found)


def measure_recall(
    identifiers: Sequence[str], messages: Sequence[Mapping[str, Any]]
) -> tuple[float, list[str]]:
    """The share of `identifiers` present verbatim in `messages`, and the missing ones.

    An empty list of identifiers has a recall of 1.0.
    """
    return recall_of(identifiers)(messages)


def recall_of(
    identifiers: Sequence[str],
) -> Callable[[Sequence[Mapping[str, Any]]], tuple[float, list[str]]]:
    """`measure_recall` of `identifiers` for any `messages`: the identifiers are split into
    words once for every history measured (a run measures its compacted history twice
    when it asks again)."""
    prepared = _Prepared(identifiers)

    def measure(messages: Sequence[Mapping[str, Any]]) -> tuple[float, list[str]]:
        if not prepared.identifiers:
            return 1.0, []
        haystack = "\n".join(_searchable_texts(messages))
        missing = _Words(haystack).missing_prepared(prepared)
        total = len(prepared.identifiers)
        return (total - len(missing)) / total, missing

    return measure


def _triple(first: str, second: str, third: str) -> int:
    """The hash of three words in a row. Two triples may share one, so a triple whose hash
    the text lacks is not in the text, and one whose hash it has is searched for."""
    return hash((first, second, third))


def _triples(words: list[str]) -> set[int]:
    """The `_triple` of each three words in a row of `words`."""
    return set(map(hash, zip(words, words[1:], words[2:], strict=False)))


class _Prepared:
    """Identifiers with, for one of five words or more, the `_triple` of its 2nd to 4th
    words (`_Words.missing`), else None."""

    def __init__(self, identifiers: Sequence[str]) -> None:
        self.identifiers = list(identifiers)
        self.keys: list[int | None] = []
        for identifier in self.identifiers:
            parts = identifier.split(None, 4)
            five = len(parts) == 5
            self.keys.append(_triple(parts[1], parts[2], parts[3]) if five else None)


class _Words:
    """The whitespace-delimited words of a text, to rule out absent identifiers cheaply.

    Where an identifier occurs, each of its words with whitespace on both sides inside the
    identifier is a whole word of the text, and three such words in a row are three words
    in a row of the text; a word with whitespace only before it starts a word of the text,
    one with whitespace only after it ends one. An identifier of one word (a path, a URL)
    lies inside one word of the text, so it is looked up among the suffixes of the text's
    words that hold its `/` or `.` (searched in the long ones). An identifier that is a word
    of the text is there.
    """

    AFFIX: Final = 4

    def __init__(self, text: str) -> None:
        self.text = text
        self.words = text.split()
        self.whole = set(self.words)

    @cached_property
    def triples(self) -> set[int]:
        """The hashes of each three words in a row (`_triple`): a test that rules out."""
        return _triples(self.words)

    @cached_property
    def starts(self) -> set[str]:
        return {word[: self.AFFIX] for word in self.whole if len(word) >= self.AFFIX}

    @cached_property
    def ends(self) -> set[str]:
        return {word[-self.AFFIX :] for word in self.whole if len(word) >= self.AFFIX}

    def holds(self, identifier: str) -> bool:
        """True when `identifier` occurs verbatim in the text."""
        return not self.missing([identifier])

    def missing(self, identifiers: Sequence[str]) -> list[str]:
        """The `identifiers` that do not occur in the text, in order.

        A word of the text is there; an identifier whose 2nd to 4th words (whitespace on
        both sides) are not three words in a row of the text is not."""
        whole = self.whole
        missing = []
        for identifier in identifiers:
            if identifier in whole:
                continue
            parts = identifier.split(None, 4)
            if len(parts) == 5:
                if _triple(parts[1], parts[2], parts[3]) not in self.triples:
                    missing.append(identifier)
                    continue
                parts = identifier.split()
            if not self._holds(identifier, parts):
                missing.append(identifier)
        return missing

    def missing_prepared(self, prepared: _Prepared) -> list[str]:
        """`missing(prepared.identifiers)`, their words split beforehand."""
        whole = self.whole
        triples: set[int] | None = None
        missing = []
        for identifier, key in zip(prepared.identifiers, prepared.keys, strict=True):
            if key is None:  # fewer than five words: all of them
                if identifier not in whole and not self._holds(identifier, identifier.split()):
                    missing.append(identifier)
                continue
            # five words or more: not a word of the text (it holds whitespace)
            if triples is None:
                triples = self.triples
            if key not in triples or not self._holds(identifier, identifier.split()):
                missing.append(identifier)
        return missing

    def _holds(self, identifier: str, parts: list[str]) -> bool:
        """`holds`, given the words of `identifier`."""
        if len(parts) == 1 and len(parts[0]) == len(identifier):
            if "/" in identifier or "." in identifier:
                return self._inside_a_word(identifier)
            return identifier in self.text
        return self._may_hold(identifier, parts) and identifier in self.text

    @cached_property
    def suffixes(self) -> list[str]:
        """The suffixes of the short words that hold a `/` or a `.`, from the first up to
        one starting at the last of these marks, sorted."""
        return sorted(
            {
                word[start:]
                for word in self.whole
                if len(word) <= _SHORT_WORD and ("/" in word or "." in word)
                for start in range(max(word.rfind("/"), word.rfind(".")) + 1)
            }
        )

    @cached_property
    def long_words(self) -> str:
        """The words too long to list their suffixes (their number of characters is the
        square of the word's) that hold a `/` or a `.`, one a line."""
        return "\n".join(
            word for word in self.whole if len(word) > _SHORT_WORD and ("/" in word or "." in word)
        )

    def _inside_a_word(self, identifier: str) -> bool:
        """True when `identifier`, one word holding a `/` or a `.`, is inside a word of the
        text: it then starts one of `suffixes` (a bisection finds it), or is in a long word."""
        suffixes = self.suffixes
        index = bisect_left(suffixes, identifier)
        if index < len(suffixes) and suffixes[index].startswith(identifier):
            return True
        return identifier in self.long_words

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
                if _triple(bounded[index], bounded[index + 1], bounded[index + 2]) not in triples:
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


class _Scan:
    """One walk over a history: the identifiers found so far, in order (`found`).

    A text's paths, URLs and file names are found word by word, and what a word gives depends
    on the word alone: a word met before (in any text) gives nothing new, so only the words
    not in `words` yet are matched."""

    def __init__(self) -> None:
        self.found: dict[str, None] = {}
        self.words: set[str] = set()
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
            if role == "user" and starts_round(message):
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
            for text in _strings(arguments):
                self.text(text, False)
            for entry in _open_todo_entries(arguments):
                self.add(entry)
        elif kind == "tool_result":
            if block.get("is_error"):
                name = self.asked.get(str(block.get("tool_use_id")))
                if name:
                    self.add(name)
            content = block.get("content")
            text = content if isinstance(content, str) else tool_result_text(content)
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
    if any("://" in word for word in words):
        rest = []
        for word in words:
            if "://" in word:
                found.extend(match.group().rstrip(".,;:!?") for match in _URL.finditer(word))
                rest.extend(_URL.sub(" ", word).split())
            else:
                rest.append(word)
    for word in rest:
        if "/" in word:
            for match in _PATH.finditer(word):
                path = match.group().rstrip(".,;:!?")
                if path.startswith(("/", "./", "../", "~/")) or _EXTENSION.search(path):
                    found.append(path)
    for word in rest:
        if "." in word:
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

    `first`: where its first error word is. A match of the error pattern holds one and
    starts at the start of a word (of `\\w` characters) or at the error word, so it is
    searched from the last space before `first`; whitespace around the line changes no
    word boundary, so the unstripped line has the same matches as the stripped one."""
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


def _first_line(text: str) -> str:
    return first_nonblank_line(text).strip()[:_MAX_LINE]


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
