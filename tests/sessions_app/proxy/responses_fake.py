"""A small local OpenAI Responses server for the Responses route's tests (127.0.0.1 only).

`POST /v1/responses` answers each request with the next scripted output (a list of items;
the default: one assistant message), as a response object or, for `"stream": true`, as the
events the SDK and Codex read (`response.created`, `response.output_item.added` / `.done`
per item, `response.completed` with the whole response). A scripted `Failure` streams
`response.failed` (or answers its HTTP error). `GET /v1/models` lists one model. Every
request is recorded with its raw body and headers.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["Failure", "FakeResponses", "Seen", "function_call", "message", "reasoning"]


@dataclass(frozen=True)
class Seen:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None


@dataclass(frozen=True)
class Failure:
    """A failed response: streamed as `response.failed`, else answered with `status`."""

    code: str = "context_length_exceeded"
    message: str = "Your input exceeds the context window of this model."
    status: int = 400


def message(text: str, item_id: str = "") -> dict[str, Any]:
    """An assistant output message item."""
    return {
        "type": "message",
        "id": item_id or f"msg_{abs(hash(text)) % 10**8}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reasoning(summary: str, encrypted: str, item_id: str = "rs_1") -> dict[str, Any]:
    """A reasoning item with a summary and encrypted content."""
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted,
    }


def function_call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A function call item."""
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "status": "completed",
        "name": name,
        "arguments": json.dumps(arguments),
        "call_id": call_id,
    }


@dataclass
class FakeResponses:
    """The server; `script(...)` queues outputs (item lists or `Failure`s)."""

    requests: list[Seen] = field(default_factory=list)
    usage: dict[str, Any] = field(
        default_factory=lambda: {
            "input_tokens": 120,
            "input_tokens_details": {"cached_tokens": 100},
            "output_tokens": 30,
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": 150,
        }
    )

    def __post_init__(self) -> None:
        self._queue: deque[Any] = deque()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>` (no /v1: as CTXWEB_UPSTREAM_OPENAI_URL is set)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, *outputs: Any) -> None:
        """Queue the next answers: item lists, or `Failure`s."""
        with self._lock:
            self._queue.extend(outputs)

    def bodies(self, path: str = "/v1/responses") -> list[Any]:
        """The decoded bodies received on `path`."""
        return [seen.body for seen in self.requests if seen.path == path]

    def next_output(self) -> Any:
        with self._lock:
            return self._queue.popleft() if self._queue else [message("ok")]

    def response(self, output: list[dict[str, Any]], body: Any) -> dict[str, Any]:
        return {
            "id": f"resp_{next(self._ids)}",
            "object": "response",
            "created_at": 1795856086,
            "status": "completed",
            "model": (body or {}).get("model", "gpt-test"),
            "output": output,
            "usage": self.usage,
            "error": None,
            "incomplete_details": None,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    def events(self, output: Any, body: Any) -> Iterator[dict[str, Any]]:
        if isinstance(output, Failure):
            failed = {**self.response([], body), "status": "failed", "usage": None}
            failed["error"] = {"code": output.code, "message": output.message}
            yield {"type": "response.created", "response": {**failed, "status": "in_progress"}}
            yield {"type": "response.failed", "response": failed}
            return
        whole = self.response(output, body)
        yield {"type": "response.created", "response": {**whole, "output": [], "usage": None}}
        for index, item in enumerate(output):
            yield {"type": "response.output_item.added", "output_index": index, "item": item}
            if item.get("type") == "message":
                text = item["content"][0]["text"]
                delta = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield {"type": "response.output_text.delta", **delta, "delta": text}
            yield {"type": "response.output_item.done", "output_index": index, "item": item}
        yield {"type": "response.completed", "response": whole}


def _handler(fake: FakeResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # as real API servers answer: with Nagle's algorithm a small answer waits for the
        # client's delayed ACK (tests/support/fake_server.py; bench/proxy.py times this fake)
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            fake.requests.append(Seen("GET", self.path, self._headers(), b""))
            if self.path.startswith("/v1/models"):
                models = {"object": "list", "data": [{"id": "gpt-test", "object": "model"}]}
                self._json(200, models)
            else:
                self._json(404, {"error": {"message": "not found", "type": "invalid_request"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            fake.requests.append(Seen("POST", self.path, self._headers(), raw, body))
            output = fake.next_output()
            if isinstance(body, dict) and body.get("stream"):
                self._stream(fake.events(output, body))
            elif isinstance(output, Failure):
                error = {"message": output.message, "type": "invalid_request_error"}
                self._json(output.status, {"error": {**error, "code": output.code}})
            else:
                self._json(200, fake.response(output, body))

        def _headers(self) -> dict[str, str]:
            return {key.lower(): value for key, value in self.headers.items()}

        def _stream(self, events: Iterator[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for number, event in enumerate(events):
                data = json.dumps({**event, "sequence_number": number})
                self.wfile.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
