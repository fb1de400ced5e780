"""Per-message repair: any source message becomes a well-formed canonical message.

Nothing is silently lost: a block the canonical model cannot hold is moved to the message's
import data (`extra["unsupported_blocks"]`), a misplaced tool block becomes marked text, and
empty content becomes a marked placeholder. Pairing tool calls with results is the builder's
job (it needs the neighbouring messages).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from compaction import Block

from .blocks import EMPTY_TEXT, text_block
from .types import ImportedMessage

__all__ = ["normalize_message"]

_ROLES: Final = frozenset({"system", "user", "assistant"})
_SYSTEM_LIKE: Final = frozenset({"system", "developer"})
_RESULT_INNER: Final = frozenset({"text", "image", "document"})


def normalize_message(item: ImportedMessage) -> ImportedMessage:
    """`item` with a canonical role and well-formed content (a new message dict)."""
    message = dict(item.message)
    role = message.get("role")
    if role in _SYSTEM_LIKE:
        if role != "system":
            item.extra.setdefault("original_role", role)
        role = "system"
    elif role not in _ROLES:
        item.extra.setdefault("original_role", role)
        role = "user"
    message["role"] = role
    message["content"] = _content(message.get("content"), role, item.extra)
    item.message = message
    return item


def _content(content: Any, role: str, extra: dict[str, Any]) -> str | list[Block]:
    if isinstance(content, str):
        if content.strip():
            return content
        extra["ctxweb_placeholder"] = True
        return EMPTY_TEXT
    if isinstance(content, Mapping):
        content = [content]
    blocks: list[Block] = []
    if isinstance(content, list):
        for index, raw in enumerate(content):
            block = _block(raw, role)
            if block is None:
                if not _is_empty_text(raw):
                    extra.setdefault("unsupported_blocks", []).append(
                        {"index": index, "block": raw}
                    )
            else:
                blocks.append(block)
    elif content is not None:
        extra.setdefault("unsupported_blocks", []).append({"index": 0, "block": content})
    if not blocks:
        extra["ctxweb_placeholder"] = True
        blocks.append(text_block(EMPTY_TEXT))
    return blocks


def _is_empty_text(raw: Any) -> bool:
    return (
        isinstance(raw, Mapping)
        and raw.get("type") == "text"
        and isinstance(raw.get("text"), str)
        and not raw["text"].strip()
    )


def _block(raw: Any, role: str) -> Block | None:
    """The canonical form of one block, or None when it cannot be one."""
    if isinstance(raw, str):
        return text_block(raw) if raw.strip() else None
    if not isinstance(raw, Mapping):
        return None
    kind = raw.get("type")
    if kind == "text":
        text = raw.get("text")
        if not isinstance(text, str):
            text = "" if text is None else json.dumps(text, ensure_ascii=False)
        return dict(raw, text=text) if text.strip() else None
    if kind == "thinking":
        thinking = raw.get("thinking")
        return dict(raw, thinking=thinking if isinstance(thinking, str) else "")
    if kind == "redacted_thinking":
        return dict(raw) if isinstance(raw.get("data"), str) else None
    if kind in {"image", "document"}:
        return dict(raw) if isinstance(raw.get("source"), Mapping) else None
    if kind == "tool_use":
        return _tool_use(raw) if role == "assistant" else _misplaced(raw, "tool call")
    if kind == "tool_result":
        return _tool_result(raw) if role == "user" else _misplaced(raw, "tool result")
    return None


def _tool_use(raw: Mapping[str, Any]) -> Block:
    block = dict(raw)
    block_id = raw.get("id")
    block["id"] = block_id if isinstance(block_id, str) and block_id else None
    name = raw.get("name")
    block["name"] = name if isinstance(name, str) and name else "unknown_tool"
    value = raw.get("input")
    if value is None:
        block["input"] = {}
    elif not isinstance(value, Mapping):
        block["input"] = {"raw": value}
    return block


def _tool_result(raw: Mapping[str, Any]) -> Block:
    block = dict(raw)
    tool_id = raw.get("tool_use_id")
    block["tool_use_id"] = tool_id if isinstance(tool_id, str) and tool_id else None
    block["content"] = _result_content(raw.get("content"))
    if "is_error" in block and not isinstance(block["is_error"], bool):
        block["is_error"] = bool(block["is_error"])
    return block


def _result_content(content: Any) -> str | list[Block]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    inner: list[Block] = []
    for raw in content:
        if isinstance(raw, Mapping) and raw.get("type") in _RESULT_INNER:
            block = _block(raw, "user")
            if block is not None:
                inner.append(block)
        elif isinstance(raw, str):
            inner.append(text_block(raw))
        elif raw is not None:
            # e.g. Claude Code's tool_reference: keep its data, as text the model can read.
            inner.append(text_block(json.dumps(raw, ensure_ascii=False)))
    return inner


def _misplaced(raw: Mapping[str, Any], what: str) -> Block:
    body = json.dumps(dict(raw), ensure_ascii=False)
    return text_block(f"[ctxweb: {what} in a message of the wrong role]\n{body}")
