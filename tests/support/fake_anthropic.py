"""A local fake of the Anthropic Messages API for tests: real HTTP on 127.0.0.1.

    server = FakeAnthropic().start()        # or the `fake_anthropic` pytest fixture
    server.script(Reply.overloaded(), Reply.text("the summary"))
    client = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)
    ...
    server.requests[0].body["model"]        # what the client sent
    server.stop()

`POST /v1/messages` answers with the scripted replies in order, then with `default`
(a plain success), each with its extra response headers (`Retry-After`, ...). Every
request is recorded. `tests/support/fake_openai.py` serves Chat Completions the same way.
Nothing here reaches the network: the server binds 127.0.0.1 on an ephemeral port and runs
in a background thread.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["FakeAnthropic", "RecordedRequest", "Reply"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: HTTP status, JSON body (None sends `content: null` bodies as
    given), and a delay before answering (a delay past the client's timeout is a hang)."""

    status: int = 200
    body: Any = None
    delay: float = 0.0
    content: Any = field(default=None)  # filled into a success message when body is None
    stop_reason: str | None = "end_turn"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, text: str = "fake summary", *, stop_reason: str = "end_turn") -> Reply:
        """A success whose content is one text block."""
        return cls(content=[{"type": "text", "text": text}], stop_reason=stop_reason)

    @classmethod
    def blocks(cls, content: Any, *, stop_reason: str | None = "end_turn") -> Reply:
        """A success with the given `content` (a list of blocks, or None for `null`)."""
        return cls(content=content if content is not None else _NULL, stop_reason=stop_reason)

    @classmethod
    def empty_text(cls) -> Reply:
        """A success whose only text block is blank."""
        return cls.text("   ")

    @classmethod
    def max_tokens_no_text(cls) -> Reply:
        """`stop_reason: max_tokens` and no content at all."""
        return cls.blocks([], stop_reason="max_tokens")

    @classmethod
    def thinking_only(cls) -> Reply:
        """Only thinking and redacted_thinking blocks, no text."""
        return cls.blocks(
            [
                {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
            ]
        )

    @classmethod
    def content_null(cls) -> Reply:
        """A success whose `content` is null."""
        return cls.blocks(None)

    @classmethod
    def error(cls, status: int, error_type: str, message: str = "fake error") -> Reply:
        """An API error response with the API's error body."""
        body = {"type": "error", "error": {"type": error_type, "message": message}}
        return cls(status=status, body=body)

    @classmethod
    def refusal(cls, text: str = "") -> Reply:
        """`stop_reason: refusal` (with whatever text came before it)."""
        return cls.blocks([{"type": "text", "text": text}] if text else [], stop_reason="refusal")

    @classmethod
    def prompt_too_long(cls) -> Reply:
        """The API's answer to a request over the model's context window."""
        return cls.error(
            400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"
        )

    @classmethod
    def rate_limited(cls, **headers: str) -> Reply:
        """429; `headers` with `_` for `-`, e.g. `retry_after="7"`, `retry_after_ms="250"`."""
        return cls.error(429, "rate_limit_error", "rate limited").with_headers(**headers)

    def with_headers(self, **headers: str) -> Reply:
        """This reply with extra response headers (`_` in a name is sent as `-`)."""
        extra = {name.replace("_", "-"): value for name, value in headers.items()}
        return replace(self, headers={**self.headers, **extra})

    @classmethod
    def server_error(cls) -> Reply:
        return cls.error(500, "api_error", "internal error")

    @classmethod
    def overloaded(cls) -> Reply:
        return cls.error(529, "overloaded_error", "Overloaded")

    @classmethod
    def hang(cls, seconds: float = 5.0) -> Reply:
        """Answer (successfully) only after `seconds`: longer than a short client timeout."""
        return cls(content=[{"type": "text", "text": "too late"}], delay=seconds)


_NULL: Any = object()  # marks `content: null` in a success body


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]  # lowercased names
    body: Any

    @property
    def api_key(self) -> str | None:
        """The credential sent, as `x-api-key` or as an `authorization: Bearer` token."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        authorization = self.headers.get("authorization", "")
        return authorization.removeprefix("Bearer ") if authorization else None

    @property
    def prompt(self) -> str:
        """The text of the last user message (the summary prompt)."""
        content = self.body["messages"][-1]["content"]
        if isinstance(content, str):
            return content
        return "\n".join(block.get("text", "") for block in content)


class FakeAnthropic:
    """The fake server. `script()` sets the replies; `requests` records what came in."""

    #: The one path the server answers; `base_url` is what an SDK client is given.
    path = "/v1/messages"
    url_suffix = ""

    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or Reply.text()
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`, for the SDK's base_url."""
        if self._server is None:
            raise RuntimeError("FakeAnthropic is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.url_suffix}"

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging replies are released at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def script(self, *replies: Reply) -> None:
        """Replace the queue of replies."""
        with self._lock:
            self._replies = deque(replies)

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the queue."""
        with self._lock:
            self._replies.extend(replies)

    def reset(self) -> None:
        """Forget the recorded requests and the queue."""
        with self._lock:
            self._replies.clear()
            self.requests.clear()

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self._replies)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the handler -------------------------------------------------------------

    def _take(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self._replies.popleft() if self._replies else self.default

    def _error_body(self, status: int, message: str) -> Any:
        return Reply.error(status, "not_found_error", message).body

    def _success_body(self, reply: Reply, request_body: Any) -> dict[str, Any]:
        content = None if reply.content is _NULL else reply.content
        model = request_body.get("model", "fake") if isinstance(request_body, dict) else "fake"
        return {
            "id": f"msg_fake_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
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
            if self.path.split("?")[0] != fake.path:
                self._send(404, fake._error_body(404, self.path))
                return
            reply = fake._take(request)
            if reply.delay and fake._stopping.wait(reply.delay):
                return  # the server is stopping: drop the hanging request
            payload = reply.body if reply.body is not None else fake._success_body(reply, body)
            self._send(reply.status, payload, reply.headers)

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
                pass  # the client gave up (timeout): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
