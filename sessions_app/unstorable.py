"""Values no database can store: NUL characters, lone surrogates, non-finite numbers. Pure Python.

- U+0000: PostgreSQL refuses it in text and jsonb (sessions_app/nul.py).
- A lone surrogate (U+D800..U+DFFF): Python decodes the JSON escape `"\\ud800"` into one, but
  it is not valid Unicode: it cannot be encoded as UTF-8, so PostgreSQL refuses it and every
  later export, page or compaction of a session that stored it (on SQLite) fails.
- NaN and infinities (`1e400` parses as infinity): not JSON; jsonb refuses them.

The API refuses such input with the path of each value (`messages[0].content[1].text`);
importers replace it (`clean`), as they strip NUL characters: refusing a whole transcript for
one bad character would lose the rest of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from compaction import Problem

from .nul import NUL, NUL_MESSAGE

__all__ = [
    "MAX_DEPTH",
    "NONFINITE_MESSAGE",
    "REPLACEMENT",
    "SURROGATE_MESSAGE",
    "clean",
    "clean_text",
    "has_surrogate",
    "too_deep",
    "unstorable_problems",
]

SURROGATE_MESSAGE: Final = (
    "must not contain a lone surrogate (U+D800..U+DFFF); send valid UTF-8 "
    "(JSON escapes of characters beyond U+FFFF come in pairs)"
)
NONFINITE_MESSAGE: Final = "must be a finite number (NaN and infinities are not JSON)"
#: What importers put in place of a lone surrogate: U+FFFD, the Unicode replacement character.
REPLACEMENT: Final = "\ufffd"
#: Deepest nesting of JSON accepted from a client or a transcript. Real messages nest a few
#: levels (body, message, content, block, tool input...); far deeper input only serves to
#: exhaust the recursion limit of whatever walks it later.
MAX_DEPTH: Final = 128

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    """True when `text` holds a surrogate code point (never valid on its own in a str)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def clean_text(text: str) -> str:
    """`text` without NUL characters and with lone surrogates replaced by U+FFFD."""
    if NUL in text:
        text = text.replace(NUL, "")
    return _SURROGATE.sub(REPLACEMENT, text) if has_surrogate(text) else text


def clean(value: Any) -> Any:
    """JSON-like `value` made storable: `clean_text` on every string and key, null for NaN
    and infinities. Iterative (no recursion limit); containers are copied."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        current, parent, slot = stack.pop()
        if isinstance(current, str):
            parent[slot] = clean_text(current)
        elif isinstance(current, float) and not math.isfinite(current):
            parent[slot] = None
        elif isinstance(current, Mapping):
            copy: dict[Any, Any] = {}
            parent[slot] = copy
            for key, item in current.items():
                name = clean_text(key) if isinstance(key, str) else key
                copy[name] = None
                stack.append((item, copy, name))
        elif isinstance(current, list | tuple):
            items: list[Any] = [None] * len(current)
            parent[slot] = items
            stack.extend((item, items, index) for index, item in enumerate(current))
        else:
            parent[slot] = current
    return root[0]


def unstorable_problems(value: Any, path: str = "", *, limit: int = 20) -> list[Problem]:
    """A Problem (at most `limit`) for every string or key holding a NUL character or a lone
    surrogate and every NaN or infinite number in `value`; paths extend `path`."""
    problems: list[Problem] = []
    for problem in _problems(value, path):
        problems.append(problem)
        if len(problems) >= limit:
            break
    return problems


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when containers in `value` nest deeper than `limit` levels."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        children: Any
        if isinstance(current, Mapping):
            children = current.values()
        elif isinstance(current, list | tuple):
            children = current
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _problems(value: Any, path: str) -> Iterator[Problem]:
    # Iterative and in document order: a deeply nested body must not hit the recursion limit.
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            message = _text_problem(current)
            if message:
                yield Problem(where or "body", message)
        elif isinstance(current, float):
            if not math.isfinite(current):
                yield Problem(where or "body", NONFINITE_MESSAGE)
        elif isinstance(current, Mapping):
            children: list[tuple[Any, str]] = []
            for key, item in current.items():
                name = str(key)
                child = f"{where}.{_printable(name)}" if where else _printable(name)
                message = _text_problem(name)
                if message:
                    yield Problem(child, f"key {message}")
                children.append((item, child))
            stack.extend(reversed(children))
        elif isinstance(current, list | tuple):
            stack.extend(reversed([(item, f"{where}[{i}]") for i, item in enumerate(current)]))


def _text_problem(text: str) -> str:
    if NUL in text:
        return NUL_MESSAGE
    return SURROGATE_MESSAGE if has_surrogate(text) else ""


def _printable(name: str) -> str:
    """A key as shown in a path: NUL written `\\u0000`, a lone surrogate `\\ud800`."""
    name = name.replace(NUL, "\\u0000")
    if has_surrogate(name):
        name = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return name
