"""Export to an Anthropic Messages request body: `{"system": ..., "messages": [...]}`.

Leading system messages become `system`. The Messages API has no system role inside
`messages`, so a later system message becomes a user text block `<system>…</system>` in its
place; same-role neighbours are then merged, so roles alternate (docs/exports.md). Every
block keeps only the keys the Messages API accepts for its type (ctxweb's own markers and
source-specific keys are dropped), so the body can be sent as is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from compaction import Block, blocks_of, merge_adjacent_roles

__all__ = ["clean_block", "request_messages", "system_block", "to_anthropic"]

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
    system, rest = request_messages(messages)
    body: dict[str, Any] = {}
    if system:
        body["system"] = _system([message.get("content") for message in system])
    body["messages"] = [
        {"role": message["role"], "content": clean_content(message.get("content"))}
        for message in rest
    ]
    return body


def request_messages(
    messages: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """(leading system messages, the rest as alternating user/assistant messages).

    The rest keeps only role and content, as stored (blocks are not cleaned): a later
    system message becomes a user message holding `system_block`, then same-role
    neighbours are merged.
    """
    system: list[Mapping[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system" and not rest:
            system.append(message)
        elif role == "system":
            rest.append({"role": "user", "content": [system_block(message)]})
        else:
            rest.append({"role": role, "content": message.get("content")})
    return system, merge_adjacent_roles(rest, tool_results_first=True)


def system_block(message: Mapping[str, Any]) -> Block:
    """A mid-conversation system message as one user text block `<system>…</system>`."""
    texts = [str(b.get("text", "")) for b in blocks_of(message) if b.get("type") == "text"]
    return _text("<system>\n" + "\n\n".join(texts) + "\n</system>")


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
