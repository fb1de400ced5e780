"""The one local HTTP server behind the fake provider APIs (tests/support/fake_anthropic.py,
fake_openai.py, fake_streaming.py): 127.0.0.1 on an ephemeral port, a daemon thread, every
request recorded, scripted replies answered in order.

A fake subclasses `FakeServer` and says what a success looks like (`_success_body`), what
an unknown path gets (`_error_body`), which `paths` it serves and, to stream, the events of
a reply (`events`). Nothing here reaches the network.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, Self

__all__ = ["FakeServer", "RecordedRequest", "ScriptedReply"]


class ScriptedReply(Protocol):
    """What the server needs of a reply (tests/support/fake_anthropic.py's `Reply`)."""

    @property
    def status(self) -> int: ...
    @property
    def body(self) -> Any: ...
    @property
    def delay(self) -> float: ...
    @property
    def headers(self) -> dict[str, str]: ...


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


class FakeServer:
    """Scripting, recording and serving. `script()` sets the replies; `requests` records
    what came in; `default` answers once the script is used up."""

    #: The paths the server answers (others get a 404); `base_url` is what a client is given.
    paths: tuple[str, ...] = ()
    url_suffix = ""
    #: Seconds between two events of a stream (time to first byte tests).
    event_delay: float = 0.0

    def __init__(self, default: Any) -> None:
        self.default = default
        self.requests: list[RecordedRequest] = []
        #: `time.monotonic()` when each streamed event was written, in order.
        self.sent_at: list[float] = []
        self._replies: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>` (+ `url_suffix`), for the SDK's base_url."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
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

    def script(self, *replies: Any) -> None:
        """Replace the queue of replies."""
        with self._lock:
            self._replies = deque(replies)

    def enqueue(self, *replies: Any) -> None:
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

    # --- what a fake says ----------------------------------------------------------------

    def _success_body(self, reply: Any, request_body: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> Any:
        raise NotImplementedError

    def events(self, reply: Any, body: dict[str, Any]) -> Iterator[bytes] | None:
        """The server-sent events answering a `"stream": true` request (None: no streaming)."""
        return None

    # --- used by the handler -------------------------------------------------------------

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            reply: ScriptedReply = self._replies.popleft() if self._replies else self.default
            return reply

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _handler_for(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as real API servers answer: with Nagle's algorithm a small answer
        # waited ~40 ms for the client's delayed ACK (bench/proxy.py's direct requests).
        disable_nagle_algorithm = True

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
            if path.endswith("/count_tokens"):  # Anthropic's: n from the request's size
                fake._record(request)
                self._send(200, {"input_tokens": max(1, len(raw) // 4)})
                return
            reply = fake._take(request)
            if reply.delay and fake._stopping.wait(reply.delay):
                return  # the server is stopping: drop the hanging request
            streaming = isinstance(body, dict) and body.get("stream")
            if reply.status == 200 and reply.body is None and streaming:
                events = fake.events(reply, body)
                if events is not None:
                    self._stream(events, reply.headers)
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
                pass  # the client gave up (timeout): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
