"""Export to an OpenAI Responses request body: `{"input": [...items]}` (docs/exports.md).

The one converter from engine messages to Responses items: the export, `GET …/context?
format=responses` and the proxy's rewritten head (sessions_app/proxy/responses.py) use it.
A system message is a `developer` message; text and images are `input_text`/`input_image`
parts of a user message and `output_text` parts of an assistant message; a tool call is a
`function_call` (a `custom_tool_call` when it was one: its block's `item_type`), a tool
result its `*_output` item; thinking is a `reasoning` item (its signature, the encrypted
content the proxy stored, as `encrypted_content`) unless `reasoning=False` (the proxy's
head: the reasoning of summarized turns goes with them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from compaction import blocks_of

__all__ = ["message_items", "to_responses"]


def to_responses(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The messages as a Responses request body (no model: the caller's)."""
    custom: set[str] = set()
    items: list[dict[str, Any]] = []
    for message in messages:
        items.extend(message_items(message, custom=custom))
    return {"input": items}


def message_items(
    message: Mapping[str, Any], *, reasoning: bool = True, custom: set[str] | None = None
) -> list[dict[str, Any]]:
    """One engine message as items. `custom`: the ids of the custom tool calls seen so far
    (their results are `custom_tool_call_output` items); updated with this message's."""
    custom = set() if custom is None else custom
    role = str(message.get("role") or "user")
    if role == "system":
        role = "developer"
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in blocks_of(message):
        item = _block_item(block, role, custom, reasoning=reasoning)
        if item is None:
            part = _part(block, role)
            if part is not None:
                parts.append(part)
            continue
        if parts:
            items.append({"type": "message", "role": role, "content": parts})
            parts = []
        if item:
            items.append(item)
    if parts:
        items.append({"type": "message", "role": role, "content": parts})
    return items


def _part(block: Mapping[str, Any], role: str) -> dict[str, Any] | None:
    kind = block.get("type")
    text_type = "output_text" if role == "assistant" else "input_text"
    if kind == "text":
        return {"type": text_type, "text": str(block.get("text") or "")}
    if kind == "image" and role != "assistant":
        found = block.get("source")
        source: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        url = source.get("url") if source.get("type") == "url" else None
        if url is None and source.get("data"):
            url = f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"
        return {"type": "input_image", "image_url": url, "detail": "auto"} if url else None
    if kind in {"image", "document"}:
        return {"type": text_type, "text": f"[{kind}]"}
    return None


def _block_item(
    block: Mapping[str, Any], role: str, custom: set[str], *, reasoning: bool
) -> dict[str, Any] | None:
    """The item a block is on its own ({}: dropped; None: a part of a message)."""
    kind = block.get("type")
    if kind == "thinking" and role == "assistant":
        if not reasoning:
            return {}
        item: dict[str, Any] = {"type": "reasoning", "summary": []}
        if block.get("thinking"):
            item["summary"] = [{"type": "summary_text", "text": str(block["thinking"])}]
        if block.get("signature"):
            item["encrypted_content"] = block["signature"]
        return item
    if kind == "redacted_thinking":
        return {}
    if kind == "tool_use":
        return _call(block, custom)
    if kind == "tool_result":
        call_id = str(block.get("tool_use_id") or "")
        output = _result_text(block.get("content"))
        kind_out = "custom_tool_call_output" if call_id in custom else "function_call_output"
        return {"type": kind_out, "call_id": call_id, "output": output}
    return None


def _call(block: Mapping[str, Any], custom: set[str]) -> dict[str, Any]:
    given = block.get("input")
    arguments: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    call_id = str(block.get("id") or "")
    name = str(block.get("name") or "tool")
    if block.get("item_type") == "custom_tool_call":
        custom.add(call_id)
        text = arguments.get("input")
        return {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": str(text)}
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(dict(arguments), ensure_ascii=False, separators=(",", ":")),
    }


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = [
        str(block.get("text") or "")
        for block in content or []
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    return "\n".join(texts)
