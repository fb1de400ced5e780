"""What a tool call does to files: the paths it names and the operation, from its input alone.

One definition for every reader of tool calls: the extractive summarizer's file lines, the
session state a summary carries (`carried_state`) and the retention check's identifiers
(`retention`), so that the benchmark, the check and the UI's "what was lost" count the same
files (docs/behaviour.md#what-a-summary-always-keeps).

A call names files by its path keys (`file_path`, `path`, ...), by the words of its shell
command that look like paths (a heredoc's body is data written, not a path named), and by
the file headers of a patch (`*** Update File: src/app.py`, Codex's `apply_patch`). The
bodies a call writes (`content`, `new_string`, a test's fixture names, a module's import
specifiers) name no file the agent touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, Final

from .marked_words import marked_words

__all__ = [
    "PATH_KEYS",
    "call_paths",
    "locator_strings",
    "operation_of",
    "text_paths",
    "word_path",
]

PATH_KEYS: Final = ("file_path", "path", "filename", "file", "notebook_path", "target_file")
_PATH_LIST_KEYS: Final = ("paths", "files", "file_paths")
_COMMAND_KEYS: Final = ("command", "cmd")
#: The input keys whose strings locate something (a file, a command, a page), not content.
_LOCATOR_KEYS: Final = (*PATH_KEYS, *_PATH_LIST_KEYS, *_COMMAND_KEYS, "url")
#: The input keys that may carry a patch (Codex's `apply_patch` as a custom tool's input).
_PATCH_KEYS: Final = ("input", "patch", "raw")
#: Shells whose `-c` / `-lc` argument is the command a call runs (Codex's `shell` tool).
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh"})
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
_PATCH_FILE: Final = re.compile(
    r"^\*\*\* (?P<op>Add|Update|Delete) File: (?P<path>\S.*?)\s*$", re.MULTILINE
)
_PATCH_OPERATIONS: Final = {"Add": "written", "Update": "modified", "Delete": "deleted"}
_PATH_TOKEN: Final = re.compile(
    r"(?:\.{1,2}/|/|~/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}"
    r"|[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|c|h|cc|cpp|hpp|cs|rb|php|"
    r"md|json|yaml|yml|toml|ini|cfg|txt|sh|sql|html|css)"
)
_EDGE_PUNCTUATION: Final = "()[]{}<>,;:'\"`!?*"
_LOWER_WORD: Final = re.compile(r"[a-z]+")
_CAMEL_JOINT: Final = re.compile(r"([a-z])([A-Z])")
_HEREDOC: Final = "<<"


def operation_of(name: str, tool_input: Mapping[str, Any]) -> str:
    """What a call does to the files it names: from its command's first word, else its name."""
    command = _joined(tool_input.get("command"))
    if command.strip():
        operation = _word_operation(command.split(maxsplit=1)[0])
        if operation is not None:
            return operation
    return _word_operation(name) or "used"


@lru_cache(maxsize=1024)
def _word_operation(text: str) -> str | None:
    """The operation the words of a tool name or command name say (`_OPERATIONS`), if any."""
    words = set(_LOWER_WORD.findall(_CAMEL_JOINT.sub(r"\1 \2", text).lower()))
    for keys, operation in _OPERATIONS:
        if words & keys:
            return operation
    return None


def call_paths(name: str, tool_input: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, operation) of each file a call names (module doc), in the order of its input."""
    operation = operation_of(name, tool_input)
    for key in PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            yield value.strip(), operation
    for key in _PATH_LIST_KEYS:
        values = tool_input.get(key)
        if isinstance(values, list):
            for value in values:
                if isinstance(value, str) and value.strip():
                    yield value.strip(), operation
    for key in (*_COMMAND_KEYS, *_PATCH_KEYS):
        text = _joined(tool_input.get(key))
        if "*** " in text and (patched := list(_patch_paths(text))):
            yield from patched
        elif key in _COMMAND_KEYS:
            for path in text_paths(text.split(_HEREDOC, 1)[0]):
                yield path, operation


def _joined(value: Any) -> str:
    """A command as one string: itself, the script of `bash -lc SCRIPT`, or its argument
    list joined by spaces."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    parts = [part for part in value if isinstance(part, str)]
    if len(parts) == 3 and parts[0] in _SHELLS and parts[1] in {"-c", "-lc"}:
        return parts[2]
    return " ".join(parts)


def _patch_paths(text: str) -> Iterator[tuple[str, str]]:
    for match in _PATCH_FILE.finditer(text):
        yield match.group("path"), _PATCH_OPERATIONS[match.group("op")]


def locator_strings(tool_input: Any) -> Iterator[str]:
    """The strings of a tool input that locate something (paths, commands, URLs), not the
    content it carries (the retention check's tool-input identifiers come from these)."""
    if not isinstance(tool_input, Mapping):
        return
    for key in _LOCATOR_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str):
            yield value.split(_HEREDOC, 1)[0] if key in _COMMAND_KEYS else value
        elif isinstance(value, list):
            yield from (part for part in value if isinstance(part, str))


def text_paths(text: str) -> list[str]:
    """File paths written in free text: whole words that look like `dir/name.ext` or
    `name.py`, without their edge punctuation (never a part of a word)."""
    return [path for word in marked_words(text) if "." in word and (path := word_path(word))]


@lru_cache(maxsize=4096)
def word_path(word: str) -> str | None:
    """The path a word of free text names, without its edge punctuation; None if none."""
    candidate = word.rstrip(_EDGE_PUNCTUATION + ".").lstrip(_EDGE_PUNCTUATION)
    return candidate if _PATH_TOKEN.fullmatch(candidate) else None
