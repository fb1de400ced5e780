"""Export to an OpenAI chat request body: `{"messages": [...]}`.

The one converter to OpenAI chat messages: the export and `GET …/context?format=openai`
both use it (docs/exports.md). Same-role neighbours are merged first, so roles alternate.
Tool calls become `tool_calls` (arguments as compact JSON text) and tool results `role: "tool"`
messages placed before the rest of their user message; thinking becomes `reasoning_content`.
System messages stay `role: "system"` where they are (OpenAI accepts them anywhere), except
one right after a tool call moves after the message answering it, since `role: "tool"`
messages must follow their call. Content that was a string stays a string, block lists
become content-part lists, so importing the export gives the same messages back. Not
representable, hence dropped: a result's `is_error` flag and thinking signatures; a
plain-text document becomes its text, any other document a text note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from compaction import blocks_of, compact_json, merge_adjacent_roles, tool_use_ids

__all__ = ["continues_openai", "openai_tail", "to_openai"]

#: (role, asks for tools) of the last message `to_openai` placed (see `openai_tail`).
Tail = tuple[str, bool]


def to_openai(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The messages as an OpenAI chat request body (no model: the caller's)."""
    result: list[dict[str, Any]] = []
    ordered = _results_before_system([dict(m) for m in messages])
    for message in merge_adjacent_roles(ordered, tool_results_first=True, merge_system=True):
        role = message.get("role")
        if role == "assistant":
            result.append(_assistant(message))
        elif role == "system":
            result.append({"role": "system", "content": _joined_text(message)})
        else:
            result.extend(_user(message))
    return {"messages": result}


def openai_tail(messages: Iterable[Mapping[str, Any]]) -> Tail | None:
    """(role, asks for tools) of the last message as `to_openai` orders `messages`.

    None when there is none, or when system messages wait at the end for the answer to a
    tool call (a next message would be placed before them).
    """
    ordered, held = _ordered([dict(m) for m in messages])
    if held or not ordered:
        return None
    return str(ordered[-1].get("role")), _asks_tools(ordered)


def continues_openai(tail: Tail, first: Mapping[str, Any]) -> bool:
    """True when messages starting with `first`, after messages whose `openai_tail` is
    `tail`, convert as they would alone: `to_openai(before + after)["messages"]` is then
    `to_openai(before)["messages"] + to_openai(after)["messages"]` (no merge across, no
    system message moved across)."""
    role, asks_tools = tail
    return first.get("role") != role and not (asks_tools and first.get("role") == "system")


def _results_before_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each system message right after a tool call moved after the next other message."""
    ordered, held = _ordered(messages)
    return ordered + held


def _ordered(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(`_results_before_system` so far, the system messages still waiting at the end)."""
    ordered: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "system" and (held or _asks_tools(ordered)):
            held.append(message)
            continue
        ordered.append(message)
        ordered.extend(held)
        held = []
    return ordered, held


def _asks_tools(ordered: list[dict[str, Any]]) -> bool:
    last = ordered[-1] if ordered else None
    return last is not None and last.get("role") == "assistant" and bool(tool_use_ids(last))


def _assistant(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    blocks = blocks_of(message)
    out: dict[str, Any] = {"role": "assistant"}
    thinking = [str(b.get("thinking") or "") for b in blocks if b.get("type") == "thinking"]
    if any(thinking):
        out["reasoning_content"] = "\n\n".join(t for t in thinking if t)
    parts = [_part(b) for b in blocks if b.get("type") in {"text", "image", "document"}]
    calls = [_call(b) for b in blocks if b.get("type") == "tool_use"]
    out["content"] = parts if parts or not calls else None
    if calls:
        out["tool_calls"] = calls
    return out


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {
            "name": block.get("name"),
            "arguments": compact_json(block.get("input", {})),
        },
    }


def _user(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    blocks = blocks_of(message)
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": block.get("tool_use_id"),
            "content": _result_content(block.get("content")),
        }
        for block in blocks
        if block.get("type") == "tool_result"
    ]
    rest = [_part(b) for b in blocks if b.get("type") != "tool_result"]
    if rest or not out:
        out.append({"role": "user", "content": rest})
    return out


def _result_content(content: Any) -> Any:
    if isinstance(content, list):
        return [_part(b) for b in content if isinstance(b, Mapping)]
    return content if isinstance(content, str) else ""


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": _image_url(block.get("source"))}}
    if kind == "thinking":
        return {"type": "text", "text": str(block.get("thinking") or "")}
    source = block.get("source")
    if kind == "document" and isinstance(source, Mapping) and source.get("type") == "text":
        return {"type": "text", "text": str(source.get("data", ""))}
    return {"type": "text", "text": f"[{kind} block]"}


def _image_url(source: Any) -> str:
    if not isinstance(source, Mapping):
        return ""
    if source.get("type") == "base64":
        return f"data:{source.get('media_type')};base64,{source.get('data')}"
    return str(source.get("url") or "")


def _joined_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts: list[str] = [
        str(b.get("text", "")) for b in blocks_of(message) if b.get("type") == "text"
    ]
    return "\n\n".join(texts)
