"""File views: tool calls that show a file's content (Read, read_file, view_file, ...).

A tool_use is a file view when its name is one of `policy.file_view_tools`, its input names
a file (`file_path`, `path`, `filename` or `notebook_path`) and, for editor tools with a
`command` input, the command is `view`. Its result's text is the file's source, once the
line-number prefixes that Read-style tools add (`     12→code`, `    12\tcode` as `cat -n`
prints) are stripped: when at least half of the non-blank lines carry such a prefix, only
those lines are kept (without it), and the first number is the slice's first line. That also
drops banners such as "Here's the result of running `cat -n`" and trailing reminders.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .folding import SourceFile, fold_views
from .messages import tool_result_text
from .policy import Policy

__all__ = [
    "PATH_KEYS",
    "file_view_outlines",
    "file_view_path",
    "file_view_sources",
    "strip_line_numbers",
]

#: tool_use input keys that name the file a view shows, in order of preference.
PATH_KEYS: Final = ("file_path", "path", "filename", "notebook_path")
_NUMBERED: Final = re.compile(r"^ *(\d{1,9})(?:→|\t)(.*)$")
_NUMBERED_LINES: Final = re.compile(r"^ *(\d{1,9})(?:→|\t)(.*)$", re.MULTILINE)
_PREFIXES: Final = re.compile(r"^ *(\d{1,9})(?:→|\t)", re.MULTILINE)
#: What str.splitlines splits on besides "\n" (and "\r\n").
_OTHER_BREAKS: Final = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def file_view_path(block: Mapping[str, Any], tools: Sequence[str]) -> str | None:
    """The path a tool_use block views, or None when it is not a file view."""
    if block.get("type") != "tool_use" or block.get("name") not in tools:
        return None
    arguments = block.get("input")
    if not isinstance(arguments, Mapping):
        return None
    command = arguments.get("command")
    if command is not None and command != "view":
        return None
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def strip_line_numbers(text: str) -> tuple[str, int]:
    """The source inside a numbered listing and its first line number (see module doc).

    Text that is not mostly numbered lines is returned unchanged, starting at line 1.
    """
    if "→" not in text and "\t" not in text:  # no line can carry a prefix
        return text, 1
    other_breaks = _OTHER_BREAKS.search(text) is not None
    if not other_breaks:  # the usual listing, every line numbered: one substitution
        stripped, numbered = _PREFIXES.subn("", text)
        if not numbered:
            return text, 1
        ended = text.endswith("\n")
        first = _PREFIXES.match(text) if numbered == text.count("\n") + (not ended) else None
        if first is not None:
            return stripped if ended else stripped + "\n", max(int(first.group(1)), 1)
    if other_breaks:  # line breaks besides "\n": split as str.splitlines does
        lines = text.splitlines()
        found = [m.groups() for m in map(_NUMBERED.match, lines) if m is not None]
    else:  # one scan of the whole text: several times faster than a match per line
        lines = None
        found = _NUMBERED_LINES.findall(text)
    if not found:
        return text, 1
    total = len(lines) if lines is not None else text.count("\n") + 1
    if len(found) * 2 < total:  # perhaps fewer than half the non-blank lines: count them
        non_blank = sum(1 for line in (lines or text.splitlines()) if line.strip())
        if len(found) * 2 < non_blank:
            return text, 1
    source = "\n".join(rest for _, rest in found)
    return source + "\n", max(int(found[0][0]), 1)


def file_view_sources(
    messages: Sequence[Mapping[str, Any]], policy: Policy | None = None
) -> list[SourceFile]:
    """Every file view of a history as a SourceFile (path, stripped source, first line).

    Useful to fold the files an agent looked at, for example into a summary
    (docs/behaviour.md#file-outlines).
    """
    tools = (policy or Policy()).file_view_tools
    stripped = _Stripped()
    return [stripped(path, text) for _, path, text in _viewed(messages, tools)]


#: The views a message asks for when it asks for none (never written: `asked` is popped
#: only when it holds something).
_NO_VIEWS: Final[dict[str, str]] = {}


def _viewed(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[str]
) -> Iterator[tuple[int, str, str]]:
    """(message index, path, result text) of each file view, in order."""
    # A result answers a call of the message right before it: ids may repeat across turns.
    asked: dict[str, str] = _NO_VIEWS
    for index, message in enumerate(messages):
        content = message.get("content")
        paths = _NO_VIEWS  # most messages ask for none: no dict made for them
        for block in content if isinstance(content, list) else ():  # text holds no views
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                path = file_view_path(block, tools)
                if path is not None:
                    if paths is _NO_VIEWS:
                        paths = {}
                    paths[str(block.get("id"))] = path
            elif kind == "tool_result" and asked and not block.get("is_error"):
                viewed = asked.pop(str(block.get("tool_use_id")), None)
                if viewed is not None:
                    yield index, viewed, tool_result_text(block.get("content"))
        asked = paths


class _Stripped:
    """`strip_line_numbers` as a SourceFile, once per distinct listing (a file viewed again
    shows the same text); a text that is not a listing is its own source, as given."""

    def __init__(self) -> None:
        self.listings: dict[str, tuple[str, int]] = {}

    def __call__(self, path: str, text: str) -> SourceFile:
        found = self.listings.get(text)
        if found is None:
            found = self.listings[text] = strip_line_numbers(text)
        source, first_line = found
        return SourceFile(path, text if source == text else source, first_line)


def file_view_outlines(
    messages: Sequence[Mapping[str, Any]],
    policy: Policy | None = None,
    token_counts: Sequence[int] | None = None,
) -> str:
    """The folded outlines of the files viewed in `messages`, for a summary
    (docs/behaviour.md#file-outlines).

    A file (or slice of one) viewed more than once is folded once, as last seen; an outline
    no smaller than its source is left out; together they are held to `fold_max_tokens`
    (`folding.fold_views`). `token_counts` (one per message, e.g. cached) spares counting a
    source again when it is the whole text of a result alone in its message.
    """
    policy = policy or Policy()
    stripped = _Stripped()
    latest: dict[tuple[str, int], tuple[SourceFile, int]] = {}
    for index, path, text in _viewed(messages, policy.file_view_tools):
        source = stripped(path, text)
        latest.pop((source.path, source.first_line), None)
        latest[(source.path, source.first_line)] = (source, index)
    files = [source for source, _ in latest.values()]
    if token_counts is None:
        return fold_views(files, policy, [None] * len(files))
    known = [_lone_count(messages[i], token_counts[i], s.source) for s, i in latest.values()]
    return fold_views(files, policy, known)


def _lone_count(message: Mapping[str, Any], count: int, source: str) -> int | None:
    """`count` when `message` holds one tool_result whose content is `source` itself (then
    its count is the source's own), else None."""
    content = message.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        block = content[0]
        if block.get("type") == "tool_result" and block.get("content") is source:
            return count
    return None
