"""NUL characters (U+0000): refused in input, stripped from imported files. Pure Python.

PostgreSQL cannot store U+0000 in text or jsonb (SQLite can), so text holding one is bad
input on every database: the API refuses it with the field's path, and importers drop it
from the real files they read (refusing a whole transcript for it would lose data).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["NUL", "NUL_MESSAGE", "first_nul_path", "strip_nul"]

NUL = "\x00"
NUL_MESSAGE = "must not contain a NUL character (U+0000)"


def first_nul_path(value: Any, path: str = "") -> str | None:
    """The path of the first string or key in `value` holding a NUL character, if any."""
    return next(_nul_paths(value, path), None)


def strip_nul(value: Any) -> Any:
    """`value` with NUL characters removed from every string and mapping key (JSON-like data)."""
    if isinstance(value, str):
        return value.replace(NUL, "") if NUL in value else value
    if isinstance(value, Mapping):
        return {strip_nul(key): strip_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strip_nul(item) for item in value]
    return value


def _nul_paths(value: Any, path: str) -> Iterator[str]:
    # Iterative: a deeply nested body must not hit the recursion limit.
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            if NUL in current:
                yield where
        elif isinstance(current, Mapping):
            children: list[tuple[Any, str]] = []
            for key, item in current.items():
                name = str(key)
                child = _key_path(where, name.replace(NUL, "\\u0000"))
                if NUL in name:
                    yield child
                children.append((item, child))
            stack.extend(reversed(children))
        elif isinstance(current, list | tuple):
            stack.extend(reversed([(item, f"{where}[{i}]") for i, item in enumerate(current)]))


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
