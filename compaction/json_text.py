"""`compact_json`: a tool input as the engine counts, cuts and shows it (JSON without
spaces), made by json's C encoder built once."""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final

__all__ = ["compact_json"]


def compact_json(value: Any) -> str:
    """JSON without spaces, as tool_use input is counted and truncated."""
    if _FAST_JSON is None:  # pragma: no cover - a Python without json's C speedups
        return _COMPACT_JSON.encode(value)
    try:
        return "".join(_FAST_JSON(value, 0))
    except RecursionError:  # a cycle, or nesting too deep: the encoder's own error
        return _COMPACT_JSON.encode(value)


#: `json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, without making an
#: encoder for each call.
_COMPACT_JSON: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: What `_COMPACT_JSON.encode` builds for each value (json's C encoder), made once: without
#: the markers that detect a cycle, so it holds no state between calls (a cycle recurses
#: until RecursionError, and `_COMPACT_JSON` then raises the ValueError it always did).
_FAST_JSON: Final = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None,
        _COMPACT_JSON.default,
        encode_basestring,
        None,
        _COMPACT_JSON.key_separator,
        _COMPACT_JSON.item_separator,
        False,
        False,
        True,
    )
)
