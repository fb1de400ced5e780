"""The canonical form of a message: what "the same message" means when comparing histories.

A client sends its whole history again with every request, and re-serializes it as it goes;
a transcript read in pieces, or imported again, gives the same messages in other shapes.
Two messages are the same when their canonical forms are equal (docs/behaviour.md#canonical-form):

- a `content` given as a string is one text block (`"hi"` is `[{"type": "text", "text":
  "hi"}]`), for a message's content and a `tool_result` block's content alike;
- `cache_control` is ignored at any depth (clients move their cache breakpoints every turn);
- a key whose value is null, `false`, `[]` or `{}` counts as absent (SDKs add and drop
  them: `is_error: false`, `citations: null`; Claude Code fills a tool's defaults into the
  input it sends back, `replace_all: false`);
- key order is ignored;
- text is compared as stored: NUL characters dropped, a lone surrogate as U+FFFD
  (sessions_app/unstorable.py `clean_text`: what every path stores in their place).

Pure Python, no Django. The stable API: `canonical`, `canonical_json`, `canonical_digest`
(and `FORM`, the version of the form that digests carry); `legacy_digest` is the digest
proxied sessions stored before this form (sessions_app/services/proxying/prefix_map.py reads them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from .unstorable import clean_text

__all__ = ["FORM", "canonical", "canonical_digest", "canonical_json", "legacy_digest"]

#: The version of the canonical form (1: the proxy's digests before this module).
FORM: Final = 2
#: Keys that are request decoration, not conversation.
IGNORED: Final = frozenset({"cache_control"})


def canonical(message: Any) -> Any:
    """The canonical form of `message` (a new JSON value; `message` is not changed)."""
    return _normal(message, content=False)


def canonical_json(message: Any) -> str:
    """The canonical form as compact JSON with sorted keys: equal texts, equal messages."""
    return json.dumps(canonical(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_digest(message: Any) -> str:
    """A short digest of the canonical form (16 hex characters; lone surrogates allowed)."""
    return _hash(canonical_json(message))


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _absent(value: Any) -> bool:
    """Null, false, an empty list or object: the same as no key at all."""
    return value is None or value is False or (isinstance(value, list | dict) and not value)


def _normal(value: Any, *, content: bool) -> Any:
    """`value` normalized; `content`: it is a message's or a tool result's content."""
    if isinstance(value, str):
        text = clean_text(value)
        return [{"type": "text", "text": text}] if content else text
    if isinstance(value, Mapping):
        holds = "role" in value or value.get("type") == "tool_result" or "system" in value
        normal = {}
        for key, item in value.items():
            if key in IGNORED:
                continue
            kept = _normal(item, content=holds and key in ("content", "system"))
            if not _absent(kept):
                normal[clean_text(str(key))] = kept
        return normal
    if isinstance(value, list | tuple):
        return [_normal(item, content=False) for item in value]
    return value


def legacy_digest(message: Any) -> str:
    """The digest of form 1 (before FORM 2): `cache_control` and null or empty values
    ignored, a message's own string content as one text block, nothing else."""
    normal = _legacy(message)
    if isinstance(normal, dict) and isinstance(normal.get("content"), str):
        normal["content"] = [{"type": "text", "text": normal["content"]}]
    return _hash(json.dumps(normal, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def _legacy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            str(key): _legacy(item)
            for key, item in value.items()
            if key not in IGNORED and item is not None and item != [] and item != {}
        }
    if isinstance(value, list | tuple):
        return [_legacy(item) for item in value]
    return value
