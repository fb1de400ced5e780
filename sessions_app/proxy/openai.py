"""OpenAI Chat Completions: requests, answers and streamed answers.

The leading system/developer messages are the conversation's system prompt: kept in front
of every forwarded request, not stored as messages. `role: "tool"` results join one user
message of tool_result blocks, as the importer does (sessions_app/importers/openai_chat.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..importers.blocks import parse_arguments
from ..importers.openai_chat import OpenAIConverter, result_content
from .base import Answer, Conversation, Provider

__all__ = ["OpenAIAdapter", "OpenAIStream"]

_SYSTEM_ROLES = frozenset({"system", "developer"})


class OpenAIAdapter:
    """`POST /v1/chat/completions` bodies."""

    provider: Provider = "openai"
    source_format = "openai"

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """The conversation of a chat request (ValueError when `messages` is missing)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("messages must be a list of objects")
        head = 0
        while head < len(messages) and messages[head].get("role") in _SYSTEM_ROLES:
            head += 1
        lead = messages[:head]
        return Conversation(
            system=lead or None,
            tools=body.get("tools"),
            messages=messages[head:],
            model=str(body.get("model") or ""),
            metadata=body.get("metadata"),
            stream=bool(body.get("stream")),
            lead=lead,
        )

    def canonical(self, messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
        """Each chat message as engine messages; consecutive tool results share one."""
        converter = OpenAIConverter(builder=None)  # type: ignore[arg-type]  # convert() only
        result: list[list[dict[str, Any]]] = []
        results: dict[str, Any] | None = None
        for number, raw in enumerate(messages, start=1):
            if raw.get("role") in {"tool", "function"}:
                block = {
                    "type": "tool_result",
                    "tool_use_id": raw.get("tool_call_id"),
                    "content": result_content(raw.get("content")),
                }
                if results is None:
                    results = {"role": "user", "content": [block]}
                    result.append([results])
                else:
                    results["content"].append(block)
                    result.append([])
                continue
            results = None
            message = converter.convert(raw, number).message
            result.append([{"role": message["role"], "content": message["content"]}])
        return result

    def outgoing(
        self, body: Mapping[str, Any], conversation: Conversation, messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The body with the messages after the system prompt replaced by `messages`."""
        return {**body, "messages": [*conversation.lead, *messages]}

    def answer(self, response: Mapping[str, Any]) -> Answer | None:
        """The first choice's message, with the response's usage."""
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return None
        return _answer(message, response.get("usage"), response.get("id"))

    def accumulator(self) -> OpenAIStream:
        """A fresh accumulator of chat completion chunks."""
        return OpenAIStream()


def _answer(message: dict[str, Any], usage: Any, message_id: Any) -> Answer:
    blocks: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name") or "unknown_tool",
                "input": parse_arguments(function.get("arguments")),
            }
        )
    canonical: dict[str, Any] = {"role": "assistant", "content": blocks or ""}
    if isinstance(usage, Mapping):
        canonical["usage"] = {k: v for k, v in usage.items() if not isinstance(v, dict)}
    if isinstance(message_id, str):
        canonical["id"] = message_id
    return Answer(client=message, canonical=canonical)


class OpenAIStream:
    """Rebuilds the first choice's message from `chat.completion.chunk` deltas."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None
        self.seen = False
        self.finished = False

    def feed(self, event: str, data: str) -> None:  # noqa: ARG002 (OpenAI streams no event names)
        """Apply one chunk (unknown data is ignored); `[DONE]` ends the stream."""
        if data.strip() == "[DONE]":
            self.finished = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return
        self.id = self.id or chunk.get("id")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._delta(choice.get("delta") or {})

    def _delta(self, delta: Mapping[str, Any]) -> None:
        self.seen = True
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for call in delta.get("tool_calls") or []:
            slot = self.calls.setdefault(
                int(call.get("index", len(self.calls))),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            slot["id"] = call.get("id") or slot["id"]
            function = call.get("function") or {}
            slot["function"]["name"] += function.get("name") or ""
            slot["function"]["arguments"] += function.get("arguments") or ""

    def answer(self) -> Answer | None:
        """The rebuilt message, as the SDK's stream helpers assemble it."""
        if not self.seen:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return _answer(message, self.usage, self.id)
