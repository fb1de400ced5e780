"""Page sizes of the list endpoints; their cursors are the selectors' one codec.

`InvalidCursor`, `decode_cursor` and `encode_cursor` live in sessions_app/selectors/
cursors.py (the sessions list page uses them too) and are re-exported here for the routers.
"""

from __future__ import annotations

from ..selectors.cursors import InvalidCursor, decode_cursor, encode_cursor

__all__ = ["InvalidCursor", "decode_cursor", "encode_cursor", "page_limit"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def page_limit(limit: int | None, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    """The page size: `limit` clamped to 1..maximum."""
    return max(1, min(limit or default, maximum))
