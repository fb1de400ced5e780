"""The Anthropic Messages API: requests, answers and streamed answers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Answer, Conversation, Provider

__all__ = ["AnthropicAdapter", "AnthropicStream"]


class AnthropicAdapter:
    """`POST /v1/messages` bodies: `system`, `tools` and `messages` beside the rest."""

    provider: Provider = "anthropic"
    source_format = "anthropic"

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """The conversation of a Messages request (ValueError when `messages` is missing)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("messages must be a list of objects")
        return Conversation(
            system=body.get("system"),
            tools=body.get("tools"),
            messages=messages,
            model=str(body.get("model") or ""),
            metadata=body.get("metadata"),
            stream=bool(body.get("stream")),
        )

    def canonical(self, messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
        """Anthropic messages are the engine's own format: one stored message each."""
        return [[{"role": m.get("role"), "content": m.get("content")}] for m in messages]

    def outgoing(
        self,
        body: Mapping[str, Any],
        conversation: Conversation,  # noqa: ARG002 (the adapter protocol's; OpenAI uses it)
        messages: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """The body with `messages` replaced, every other field as the client sent it."""
        return {**body, "messages": messages}

    def answer(self, response: Mapping[str, Any]) -> Answer | None:
        """The assistant message of a Messages response, with its usage."""
        content = response.get("content")
        if response.get("type") != "message" or not isinstance(content, list):
            return None
        return _answer(content, response.get("usage"), response.get("id"))

    def accumulator(self) -> AnthropicStream:
        """A fresh accumulator of Messages stream events."""
        return AnthropicStream()


def _answer(content: list[Any], usage: Any, message_id: Any) -> Answer:
    client = {"role": "assistant", "content": content}
    canonical: dict[str, Any] = {"role": "assistant", "content": content}
    if isinstance(usage, Mapping):
        canonical["usage"] = dict(usage)
    if isinstance(message_id, str):
        canonical["id"] = message_id
    return Answer(client=client, canonical=canonical)


class AnthropicStream:
    """Rebuilds a message from `message_start`, `content_block_*` and `message_delta` events."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}
        self.usage: dict[str, Any] = {}
        self.finished = False

    def feed(self, event: str, data: str) -> None:
        """Apply one event (unknown ones are ignored)."""
        try:
            payload = json.loads(data)
        except ValueError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type") or event
        if kind == "message_stop":
            self.finished = True
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            self.message = payload["message"]
            self.usage.update(self.message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(payload.get("content_block"), dict):
            self.blocks[int(payload.get("index", len(self.blocks)))] = dict(
                payload["content_block"]
            )
        elif kind == "content_block_delta" and isinstance(payload.get("delta"), dict):
            self._delta(int(payload.get("index", 0)), payload["delta"])
        elif kind == "content_block_stop":
            self._stop(int(payload.get("index", 0)))
        elif kind == "message_delta" and isinstance(payload.get("usage"), dict):
            self.usage.update({k: v for k, v in payload["usage"].items() if v is not None})

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json") or "")
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature") or "")
        elif kind == "citations_delta" and delta.get("citation") is not None:
            block.setdefault("citations", []).append(delta["citation"])

    def _stop(self, index: int) -> None:
        text = self.partial.pop(index, None)
        if text is not None and index in self.blocks:
            try:
                self.blocks[index]["input"] = json.loads(text) if text.strip() else {}
            except ValueError:
                self.blocks[index]["input"] = {}

    def answer(self) -> Answer | None:
        """The rebuilt assistant message (None when no `message_start` came)."""
        if self.message is None:
            return None
        content = [self.blocks[index] for index in sorted(self.blocks)]
        return _answer(content, self.usage, self.message.get("id"))
