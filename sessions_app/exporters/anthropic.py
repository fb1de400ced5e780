"""Export to an Anthropic Messages request body: `{"system": ..., "messages": [...]}`.

Leading system messages become `system`; every block keeps only the keys the Messages API
accepts for its type (ctxweb's own markers and source-specific keys are dropped), so the
body can be sent as is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from compaction import Block, blocks_of

__all__ = ["clean_block", "to_anthropic"]

_ALLOWED: Final = {
    "text": frozenset({"type", "text", "citations", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "context", "citations", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}


def to_anthropic(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The messages as an Anthropic request body (no model or max_tokens: the caller's)."""
    system: list[Any] = []
    result: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "system" and not result:
            system.append(content)
            continue
        if role == "system":  # never after the start in a valid list; kept readable anyway
            role, content = "user", [{"type": "text", "text": "[system]"}, *blocks_of(message)]
        result.append({"role": role, "content": clean_content(content)})
    body: dict[str, Any] = {}
    if system:
        body["system"] = _system(system)
    body["messages"] = result
    return body


def _system(parts: list[Any]) -> str | list[Block]:
    if all(isinstance(part, str) for part in parts):
        return "\n\n".join(parts)
    blocks: list[Block] = []
    for part in parts:
        blocks.extend(clean_content(part) if isinstance(part, list) else [_text(str(part))])
    return blocks


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def clean_content(content: Any) -> Any:
    """Content with every block reduced to the API's keys."""
    if isinstance(content, list):
        return [clean_block(block) for block in content if isinstance(block, Mapping)]
    return content


def clean_block(block: Mapping[str, Any]) -> Block:
    """One block with only the keys the Messages API accepts for its type."""
    allowed = _ALLOWED.get(str(block.get("type")))
    if allowed is None:
        return dict(block)
    cleaned = {key: value for key, value in block.items() if key in allowed}
    if cleaned.get("type") == "tool_result" and isinstance(cleaned.get("content"), list):
        cleaned["content"] = clean_content(cleaned["content"])
    return cleaned
