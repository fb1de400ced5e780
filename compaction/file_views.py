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
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .folding import SourceFile, fold_views
from .messages import blocks_of, tool_result_text
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
    other_breaks = _OTHER_BREAKS.search(text) is not None
    if not other_breaks:  # the usual listing, every line numbered: one substitution
        stripped, numbered = _PREFIXES.subn("", text)
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
    # A result answers a call of the message right before it: ids may repeat across turns.
    asked: dict[str, str] = {}
    files: list[SourceFile] = []
    for message in messages:
        paths: dict[str, str] = {}
        for block in blocks_of(message):
            path = file_view_path(block, tools)
            if path is not None:
                paths[str(block.get("id"))] = path
            elif block.get("type") == "tool_result" and not block.get("is_error"):
                viewed = asked.pop(str(block.get("tool_use_id")), None)
                if viewed is not None:
                    source, first_line = strip_line_numbers(tool_result_text(block.get("content")))
                    files.append(SourceFile(viewed, source, first_line))
        asked = paths
    return files


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
    latest: dict[tuple[str, int], SourceFile] = {}
    for source in file_view_sources(messages, policy):
        latest.pop((source.path, source.first_line), None)
        latest[(source.path, source.first_line)] = source
    known = _lone_result_counts(messages, token_counts) if token_counts is not None else {}
    files = list(latest.values())
    return fold_views(files, policy, [known.get(id(file.source)) for file in files])


def _lone_result_counts(
    messages: Sequence[Mapping[str, Any]], token_counts: Sequence[int]
) -> dict[int, int]:
    """Message count by the identity of its text, for messages holding one tool_result of
    string content: that count is the text's own (a source kept unchanged is that object)."""
    counts: dict[int, int] = {}
    for message, count in zip(messages, token_counts, strict=True):
        content = message.get("content")
        if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
            block = content[0]
            text = block.get("content")
            if block.get("type") == "tool_result" and isinstance(text, str):
                counts[id(text)] = count
    return counts
