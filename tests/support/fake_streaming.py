"""Streaming fakes of the Anthropic and OpenAI APIs for the proxy tests: real HTTP, 127.0.0.1.

`StreamingAnthropic` and `StreamingOpenAI` script and record like `FakeAnthropic` and
`FakeOpenAI` (tests/support/fake_anthropic.py), and also answer `"stream": true` requests
with server-sent events built from the same scripted reply, and Anthropic's
`/v1/messages/count_tokens` (`{"input_tokens": n}`, n from the request's size).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply
from tests.support.fake_openai import FakeOpenAI

__all__ = ["StreamingAnthropic", "StreamingOpenAI"]


class _Streaming:
    """What the streaming fakes add: SSE answers, a pause between events, count_tokens."""

    paths: tuple[str, ...] = ()
    #: Seconds between two events of a stream (time to first byte tests).
    event_delay: float = 0.0
    #: `time.monotonic()` when each streamed event was written, in order.
    sent_at: list[float]

    def events(self, reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
        raise NotImplementedError

    def start(self) -> Self:
        fake: Any = self
        fake.sent_at = []
        fake._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
        fake._server.daemon_threads = True
        fake._thread = threading.Thread(
            target=fake._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        fake._thread.start()
        return self


class StreamingAnthropic(_Streaming, FakeAnthropic):
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


class StreamingOpenAI(_Streaming, FakeOpenAI):
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


def _handler_for(fake: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {key.lower(): value for key, value in self.headers.items()}
            request = RecordedRequest("POST", self.path, headers, body)
            path = self.path.split("?")[0]
            if path not in fake.paths:
                self._send(404, fake._error_body(404, self.path))
                return
            if path.endswith("/count_tokens"):
                with fake._lock:
                    fake.requests.append(request)
                self._send(200, {"input_tokens": max(1, len(raw) // 4)})
                return
            reply = fake._take(request)
            if reply.delay and fake._stopping.wait(reply.delay):
                return
            if (
                reply.status == 200
                and reply.body is None
                and isinstance(body, dict)
                and body.get("stream")
            ):
                self._stream(fake.events(reply, body), reply.headers)
                return
            payload = reply.body if reply.body is not None else fake._success_body(reply, body)
            self._send(reply.status, payload, reply.headers)

        def _stream(self, events: Iterator[bytes], headers: dict[str, str]) -> None:
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.send_header("request-id", "req_fake_stream")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                    fake.sent_at.append(time.monotonic())
                    if fake.event_delay:
                        time.sleep(fake.event_delay)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_fake")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
