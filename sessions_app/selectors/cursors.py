"""The one cursor codec: opaque keyset positions as base64url JSON objects.

The API's list endpoints and the sessions list page issue and read cursors here; a cursor
this app did not issue is `InvalidCursor`, an `InvalidInput` naming the field `cursor`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from sessions_app.nul import first_nul_path
from sessions_app.services.errors import InvalidInput, Problem

__all__ = ["CURSOR_FIELD", "InvalidCursor", "cursor_value", "decode_cursor", "encode_cursor"]

#: The name of the cursor parameter, as errors name it.
CURSOR_FIELD = "cursor"

T = TypeVar("T")


class InvalidCursor(InvalidInput):
    """A cursor that this app did not issue (a 422 on the field `cursor`)."""

    def __init__(self, field: str = CURSOR_FIELD) -> None:
        super().__init__([Problem(field, "is not a cursor this API issued")])


def encode_cursor(position: Mapping[str, Any]) -> str:
    """An opaque cursor for `position` (a JSON object; other values are written as text)."""
    raw = json.dumps(dict(position), separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    """The position of a cursor (None for the first page); InvalidCursor when malformed."""
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursor() from None
    # A NUL would reach the database's filters (PostgreSQL refuses it): not one of ours.
    if not isinstance(value, dict) or first_nul_path(value) is not None:
        raise InvalidCursor()
    return value


def cursor_value(position: Mapping[str, Any], key: str, kind: type[T]) -> T:
    """`position[key]` when it is a `kind` (a bool is no int); InvalidCursor otherwise."""
    value = position.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidCursor()
    return value
