"""Streaming fakes of the Anthropic and OpenAI APIs for the proxy tests: real HTTP, 127.0.0.1.

`StreamingAnthropic` and `StreamingOpenAI` script and record like `FakeAnthropic` and
`FakeOpenAI` (tests/support/fake_anthropic.py), and also answer `"stream": true` requests
with server-sent events built from the same scripted reply (`events`), and Anthropic's
`/v1/messages/count_tokens` (`{"input_tokens": n}`, n from the request's size). The server
itself is tests/support/fake_server.py's, as for every fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.fake_openai import FakeOpenAI

__all__ = ["StreamingAnthropic", "StreamingOpenAI"]


class StreamingAnthropic(FakeAnthropic):
    """The Messages API, streaming or not, and count_tokens."""

    paths = ("/v1/messages", "/v1/messages/count_tokens")

    def events(self, reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
        message = self._success_body(reply, body)
        start = {**message, "content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}
        yield _sse("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(message["content"] or []):
            yield from _block_events(index, block)
        delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        usage = {"output_tokens": message["usage"]["output_tokens"]}
        yield _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        yield _sse("message_stop", {"type": "message_stop"})


def _block_events(index: int, block: dict[str, Any]) -> Iterator[bytes]:
    kind = block["type"]
    empty: dict[str, dict[str, Any]] = {
        "text": {"text": ""},
        "tool_use": {"input": {}},
        "thinking": {"thinking": ""},
    }
    opening = {**block, **empty.get(kind, {})}
    if kind == "thinking":
        opening.pop("signature", None)
    yield _sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": opening},
    )
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        text = block["text"]
        deltas = [{"type": "text_delta", "text": text[i : i + 5]} for i in range(0, len(text), 5)]
    elif kind == "tool_use":
        raw = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": raw[i : i + 7]}
            for i in range(0, len(raw), 7)
        ]
    elif kind == "thinking":
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block.get("signature", "")},
        ]
    for delta in deltas:
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})


class StreamingOpenAI(FakeOpenAI):
    """Chat Completions, streaming or not."""

    paths = ("/v1/chat/completions",)

    def events(self, reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
        done = self._success_body(reply, body)
        message = done["choices"][0]["message"]
        base = {
            "id": done["id"],
            "object": "chat.completion.chunk",
            "created": done["created"],
            "model": done["model"],
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return _data({**base, "choices": [choice]})

        yield chunk({"role": "assistant", "content": ""})
        text = message.get("content") or ""
        for i in range(0, len(text), 5):
            yield chunk({"content": text[i : i + 5]})
        for index, call in enumerate(message.get("tool_calls") or []):
            yield chunk({"tool_calls": [{"index": index, **call}]})
        yield chunk({}, done["choices"][0]["finish_reason"])
        if (body.get("stream_options") or {}).get("include_usage"):
            yield _data({**base, "choices": [], "usage": done["usage"]})
        yield b"data: [DONE]\n\n"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _data(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()
