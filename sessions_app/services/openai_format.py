"""Anthropic-style messages as an OpenAI chat array (tool_calls, `role: "tool"` results)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from compaction import blocks_of, compact_json

__all__ = ["openai_messages"]


def openai_messages(
    system: str | None, messages: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The chat array for `system` and `messages` (thinking blocks are left out)."""
    chat: list[dict[str, Any]] = []
    if system:
        chat.append({"role": "system", "content": system})
    for message in messages:
        chat.extend(_convert(message))
    return chat


def _convert(message: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    role = message.get("role")
    blocks = blocks_of(message)
    if role == "assistant":
        yield _assistant(blocks)
        return
    if role == "system":
        yield {"role": "system", "content": _text(blocks)}
        return
    for block in blocks:
        if block.get("type") == "tool_result":
            yield {
                "role": "tool",
                "tool_call_id": str(block.get("tool_use_id", "")),
                "content": _result_text(block.get("content")),
            }
    converted = [_user_part(b) for b in blocks if b.get("type") != "tool_result"]
    parts = [p for p in converted if p is not None]
    if not parts:
        return
    if all(p["type"] == "text" for p in parts):
        yield {"role": "user", "content": "\n\n".join(p["text"] for p in parts)}
    else:
        yield {"role": "user", "content": parts}


def _assistant(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    text = _text(blocks)
    calls = [
        {
            "id": str(b.get("id", "")),
            "type": "function",
            "function": {
                "name": str(b.get("name", "")),
                "arguments": compact_json(b.get("input", {})),
            },
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def _text(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]"
            for b in content
            if isinstance(b, Mapping)
        )
    return ""


def _user_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
        else:
            url = str(source.get("url", ""))
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "document":
        source = block.get("source") or {}
        data = source.get("data") if source.get("type") == "text" else "[document]"
        return {"type": "text", "text": str(data)}
    return None
