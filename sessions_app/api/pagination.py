"""Opaque keyset cursors for list endpoints: base64url JSON, `next` in each page."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from compaction import PolicyError

from ..nul import first_nul_path

__all__ = ["InvalidCursor", "decode_cursor", "encode_cursor", "page_limit"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


class InvalidCursor(PolicyError):
    """A cursor that this API did not issue (a 422 on the field `cursor`)."""

    def __init__(self) -> None:
        super().__init__("cursor", "is not a cursor this API issued")


def encode_cursor(position: dict[str, Any]) -> str:
    """An opaque cursor for `position`."""
    raw = json.dumps(position, separators=(",", ":"), default=str).encode()
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


def page_limit(limit: int | None, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    """The page size: `limit` clamped to 1..maximum."""
    return max(1, min(limit or default, maximum))
