"""Parsing API request bodies: strict JSON, bounded nesting, nothing a database cannot store.

Decisions, the same for every endpoint:
- not JSON, `NaN`/`Infinity` literals (not JSON either), nesting deeper than MAX_DEPTH:
  MalformedBody, a 400 (the body cannot be read as the API's JSON);
- valid JSON holding a NUL character, a lone surrogate (`"\\ud800"`) or a number too large
  for a float (`1e400`): UnstorableBody, a 422 naming each value's path.
"""

from __future__ import annotations

import json
from typing import Any

from compaction import Problem

from ..unstorable import MAX_DEPTH, too_deep, unstorable_problems

__all__ = ["MalformedBody", "UnstorableBody", "json_type", "parse_json_body", "parse_object_body"]


class MalformedBody(ValueError):
    """A request body that is not valid JSON (or not the JSON object an endpoint needs)."""


class UnstorableBody(ValueError):
    """Valid JSON holding values no database can store; `problems` name each one."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


def parse_json_body(raw: bytes | str, path: str = "") -> Any:
    """The JSON value of `raw`; MalformedBody or UnstorableBody as described above."""
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise MalformedBody(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise MalformedBody(str(error)) from error
    if too_deep(value):
        raise MalformedBody(f"nested deeper than {MAX_DEPTH} levels")
    problems = unstorable_problems(value, path)
    if problems:
        raise UnstorableBody(problems)
    return value


def parse_object_body(raw: bytes | str) -> dict[str, Any]:
    """`parse_json_body` for endpoints whose body must be a JSON object."""
    value = parse_json_body(raw)
    if not isinstance(value, dict):
        raise MalformedBody(f"the body must be a JSON object, not {json_type(value)}")
    return value


def json_type(value: Any) -> str:
    """`value`'s JSON type, for messages: "null", "a boolean", "an array"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else "a string"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (send null or a number)")
