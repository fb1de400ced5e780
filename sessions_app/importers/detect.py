"""Recognising a transcript's format from its content (the file name is never trusted).

Each format says how it is recognised (`ImportFormat.detect`, `guess_head`, in its own
module); this module asks the registered formats in rank order. JSON-lines formats are
recognised from their first lines, JSON documents from their structure, and a document too
long to parse here from its beginning (the highest `guess_head` score).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .registry import get_format, ranked

__all__ = ["canonical_format", "detect_document", "detect_format", "detect_lines"]


def canonical_format(name: str) -> str | None:
    """The canonical format name for `name` (or an alias), None when unknown."""
    fmt = get_format(name)
    return None if fmt is None else fmt.name


def detect_format(data: bytes | str) -> str | None:
    """The format of a whole transcript or of its beginning, None when not recognised."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = text.lstrip("\ufeff \t\r\n")
    if not text:
        return None
    first_objects = list(_leading_objects(text))
    if first_objects:
        found = detect_lines(first_objects)
        if found:
            return found
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return _detect_partial(text)
    return detect_document(document)


def detect_lines(objects: Iterable[Any]) -> str | None:
    """The format of a JSON-lines file from its first parsed lines."""
    formats = ranked(lines=True)
    for value in objects:
        if not isinstance(value, Mapping):
            continue
        for fmt in formats:
            if fmt.detect(value):
                return fmt.name
    return None


def detect_document(value: Any) -> str | None:
    """The format of a parsed JSON document."""
    for fmt in ranked(lines=False):
        if fmt.detect(value):
            return fmt.name
    return None


def _leading_objects(text: str, limit: int = 20) -> Iterable[Any]:
    """Parsed JSON objects among the first lines (a corrupt line is passed over)."""
    for count, line in enumerate(text.splitlines()):
        if count >= limit:
            return
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value


def _detect_partial(text: str) -> str | None:
    """A guess from the beginning of a JSON document too long to parse here."""
    head = text[:65536]
    best, best_score = None, 0
    for fmt in ranked(lines=False):
        score = fmt.guess_head(head) if fmt.guess_head is not None else 0
        if score > best_score:
            best, best_score = fmt.name, score
    return best
