"""A local fake of the OpenAI Responses API for tests: real HTTP on 127.0.0.1.

    with FakeResponses() as server:          # base_url ends with /v1, as the SDK expects
        server.script(ResponsesReply.call("exec_command", {"cmd": "echo hi"}),
                      ResponsesReply.text("Done."))
        ...
        server.requests[0].body["input"]     # what reached it (decompressed), .raw the bytes

`POST /v1/responses` answers the scripted replies in order, then `answer(request)`: a
trailing `compaction_trigger` item (Codex's built-in provider compacting) gets one
`compaction` item with non-empty `encrypted_content`, Codex's checkpoint prompt with no
tools (a custom provider compacting) gets a summary text, anything else `default`;
`responder` replaces that choice. A `"stream": true` request gets the server-sent events
Codex and the openai SDK read (`response.created`, per item `response.output_item.added`,
the text / argument deltas and `response.output_item.done`, then `response.completed` with
the response id and usage); a `failure` streams `response.failed` instead, an `error_event`
an `error` event; `event_delay` makes a slow stream. A body sent with `Content-Encoding:
zstd` or `gzip` is decoded. `GET /v1/models` lists one model; a websocket upgrade of
`GET /v1/responses` gets 426. Every request is recorded, headers and body (`requests`), and
every output item answered (`answered`: what a client should send back unchanged). The server is
tests/support/fake_server.py's (127.0.0.1, an ephemeral port: nothing reaches the network).
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import ThreadingHTTPServer
from typing import Any, Self

from tests.support.fake_server import FakeServer, RecordedRequest, _handler_for

__all__ = [
    "CHECKPOINT_PROMPT",
    "LOCAL_SUMMARY",
    "FakeResponses",
    "ResponsesReply",
    "ResponsesRequest",
    "call_item",
    "compaction_item",
    "message_item",
    "reasoning_item",
]

Item = dict[str, Any]
#: The first words of the prompt Codex sends (as the last user message) to compact itself.
CHECKPOINT_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
LOCAL_SUMMARY = "Checkpoint summary: the work so far, for the next model."
_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):04d}"


def message_item(text: str) -> Item:
    """An assistant message holding one `output_text` part."""
    part = {"type": "output_text", "text": text, "annotations": []}
    return {
        "type": "message",
        "id": _id("msg"),
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


def reasoning_item(summary: str = "Planning.", encrypted: str | None = None) -> Item:
    """A reasoning item with a summary and (as Codex asks with `include`) encrypted content."""
    item_id = _id("rs")
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted or f"gAAAAB-opaque-{item_id}",
    }


def call_item(name: str, arguments: Any, call_id: str | None = None) -> Item:
    """A `function_call` (arguments: a JSON string, or a value that is encoded to one)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "type": "function_call",
        "id": _id("fc"),
        "status": "completed",
        "name": name,
        "arguments": text,
        "call_id": call_id or _id("call"),
    }


def compaction_item(encrypted: str | None = None) -> Item:
    """The one item answering a `compaction_trigger`: opaque (encrypted) history."""
    item_id = _id("cmp")
    return {"type": "compaction", "id": item_id, "encrypted_content": encrypted or f"cmp-{item_id}"}


@dataclass(frozen=True)
class ResponsesReply:
    """One scripted answer: its output items (a success), or an HTTP error (`status`,
    `body`, `headers`), or a streamed failure; `input_tokens` its usage (None: a quarter of
    the request's bytes), `delay` seconds before answering, `event_delay` between events."""

    items: tuple[Item, ...] = ()
    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    input_tokens: int | None = None
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    failure: dict[str, Any] | None = None
    error_event: dict[str, Any] | None = None
    event_delay: float = 0.0

    @classmethod
    def of(cls, *items: Item, input_tokens: int | None = None) -> ResponsesReply:
        """A success with these output items."""
        return cls(items=tuple(items), input_tokens=input_tokens)

    @classmethod
    def text(cls, text: str = "fake answer", *, reasoning: bool = False) -> ResponsesReply:
        """An assistant text, after a reasoning item when `reasoning`."""
        head = (reasoning_item(),) if reasoning else ()
        return cls(items=(*head, message_item(text)), reasoning_tokens=5 if reasoning else 0)

    @classmethod
    def call(
        cls, name: str, arguments: Any, call_id: str | None = None, *, reasoning: bool = True
    ) -> ResponsesReply:
        """A function call, after a reasoning item (as a reasoning model answers)."""
        head = (reasoning_item(f"Plan: call {name}."),) if reasoning else ()
        return cls(items=(*head, call_item(name, arguments, call_id)), reasoning_tokens=7)

    @classmethod
    def shell(cls, command: str, call_id: str | None = None) -> ResponsesReply:
        """Codex's shell tool (`exec_command`) running `command`."""
        return cls.call("exec_command", {"cmd": command}, call_id)

    @classmethod
    def compaction(cls, encrypted: str | None = None) -> ResponsesReply:
        return cls(items=(compaction_item(encrypted),))

    @staticmethod
    def error(
        status: int, message: str, *, code: str | None = None, kind: str = ""
    ) -> ResponsesReply:
        """An HTTP error with OpenAI's error body."""
        error = {"message": message, "type": kind or "invalid_request_error", "param": None}
        return ResponsesReply(status=status, body={"error": {**error, "code": code}})

    @classmethod
    def rate_limited(cls, retry_after: str = "7") -> ResponsesReply:
        reply = cls.error(429, "Rate limit reached", code="rate_limit_exceeded", kind="requests")
        return replace(reply, headers={"retry-after": retry_after})

    @classmethod
    def context_exceeded(cls) -> ResponsesReply:
        """A streamed `response.failed` (Codex: "ran out of room"); a JSON request gets 400."""
        error = {
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window.",
        }
        return cls(failure=error)

    @classmethod
    def error_in_stream(cls, message: str = "The server had an error.") -> ResponsesReply:
        return cls(error_event={"code": "server_error", "message": message, "param": None})

    def slow(self, event_delay: float) -> Self:
        """The same reply, streamed with `event_delay` seconds between events."""
        return replace(self, event_delay=event_delay)

    def with_usage(self, input_tokens: int, cached_tokens: int = 0) -> Self:
        return replace(self, input_tokens=input_tokens, cached_tokens=cached_tokens)


@dataclass(frozen=True)
class ResponsesRequest(RecordedRequest):
    """A recorded request, with its bytes as they arrived (`raw`, compressed or not)."""

    raw: bytes = b""

    @property
    def items(self) -> list[Item]:
        """The request's `input` items (a string input as one user message)."""
        given = self.body.get("input") if isinstance(self.body, dict) else None
        if isinstance(given, str):
            return [{"type": "message", "role": "user", "content": given}]
        return list(given or [])

    @property
    def kind(self) -> str:
        """Codex's `request_kind` (turn, compaction, prewarm), or "" from another client."""
        metadata = self.headers.get("x-codex-turn-metadata")
        try:
            return str(json.loads(metadata or "{}").get("request_kind") or "")
        except (ValueError, AttributeError):
            return ""


def is_local_compaction(body: Any) -> bool:
    """Codex's own compaction through a custom provider: no tools, the checkpoint prompt."""
    if not isinstance(body, dict) or body.get("tools") != []:
        return False
    items = body.get("input") or []
    return bool(items) and CHECKPOINT_PROMPT in json.dumps(items[-1])


def is_remote_compaction(body: Any) -> bool:
    """Codex's compaction through the built-in provider: a trailing `compaction_trigger`."""
    items = body.get("input") if isinstance(body, dict) else None
    return isinstance(items, list) and bool(items) and items[-1].get("type") == "compaction_trigger"


class FakeResponses(FakeServer):
    """The fake Responses API server."""

    paths: tuple[str, ...] = ("/v1/responses",)
    url_suffix = "/v1"

    def __init__(
        self,
        default: ResponsesReply | None = None,
        responder: Callable[[ResponsesRequest], ResponsesReply] | None = None,
    ) -> None:
        super().__init__(default or ResponsesReply.text())
        self.responder = responder
        #: Every output item answered, in order (what a client should send back unchanged).
        self.answered: list[Item] = []

    def start(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _responses_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def answer(self, request: ResponsesRequest) -> ResponsesReply:
        """The reply once the script is used up (see the module's docstring)."""
        if self.responder is not None:
            return self.responder(request)
        if is_remote_compaction(request.body):
            return ResponsesReply.compaction()
        if is_local_compaction(request.body):
            return ResponsesReply.text(LOCAL_SUMMARY)
        reply: ResponsesReply = self.default
        return reply

    def _take(self, request: RecordedRequest) -> ResponsesReply:
        with self._lock:
            self.requests.append(request)
            scripted: ResponsesReply | None = self._replies.popleft() if self._replies else None
        assert isinstance(request, ResponsesRequest)
        reply = scripted if scripted is not None else self.answer(request)
        with self._lock:
            self.answered.extend(reply.items)
        return reply

    def responses_requests(self) -> list[ResponsesRequest]:
        """The `POST /v1/responses` requests, in order."""
        return [r for r in self.requests if isinstance(r, ResponsesRequest) and r.method == "POST"]

    def _error_body(self, status: int, message: str) -> Any:
        return ResponsesReply.error(status, message).body

    def _success_body(self, reply: ResponsesReply, request_body: Any) -> dict[str, Any]:
        if reply.failure is not None:  # a JSON request cannot stream the failure
            return {"error": {**reply.failure, "type": "invalid_request_error", "param": None}}
        return _response(_id("resp"), reply, request_body, "completed", list(reply.items))

    def events(self, reply: ResponsesReply, body: dict[str, Any]) -> Iterator[bytes]:
        return _events(reply, body)


def _response(
    response_id: str, reply: ResponsesReply, body: Any, status: str, output: list[Item]
) -> dict[str, Any]:
    """A Response object."""
    model = body.get("model", "fake") if isinstance(body, dict) else "fake"
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if status == "completed":
        response["usage"] = _usage(reply, body)
    return response


def _usage(reply: ResponsesReply, body: Any) -> dict[str, Any]:
    size = len(json.dumps(body)) // 4 if body is not None else 1
    input_tokens = reply.input_tokens if reply.input_tokens is not None else max(1, size)
    output_tokens = 10 + reply.reasoning_tokens
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": reply.cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def _events(reply: ResponsesReply, body: dict[str, Any]) -> Iterator[bytes]:
    numbers = itertools.count()
    response_id = _id("resp")

    def event(kind: str, **data: Any) -> bytes:
        if reply.event_delay:
            time.sleep(reply.event_delay)
        payload = {"type": kind, "sequence_number": next(numbers), **data}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    yield event("response.created", response=_response(response_id, reply, body, "in_progress", []))
    yield event(
        "response.in_progress", response=_response(response_id, reply, body, "in_progress", [])
    )
    if reply.error_event is not None:
        yield event("error", **reply.error_event)
        return
    for index, item in enumerate(reply.items):
        for kind, data in _item_events(index, item):
            yield event(kind, **data)
    if reply.failure is not None:
        failed = {**_response(response_id, reply, body, "failed", []), "error": reply.failure}
        yield event("response.failed", response=failed)
        return
    done = _response(response_id, reply, body, "completed", list(reply.items))
    yield event("response.completed", response=done)


def _item_events(index: int, item: Item) -> Iterator[tuple[str, dict[str, Any]]]:
    """One output item's events: added (empty), its deltas, done (whole)."""
    kind = item.get("type")
    empties: dict[str, dict[str, Any]] = {
        "message": {"content": [], "status": "in_progress"},
        "function_call": {"arguments": "", "status": "in_progress"},
        "reasoning": {"summary": []},
    }
    empty = empties.get(str(kind), {})
    opening = {k: v for k, v in {**item, **empty}.items() if k != "encrypted_content"}
    at = {"output_index": index, "item_id": item.get("id")}
    yield "response.output_item.added", {"output_index": index, "item": opening}
    if kind == "message":
        yield from _text_events(at, item)
    elif kind == "function_call":
        arguments = item["arguments"]
        for start in range(0, len(arguments), 7):
            yield (
                "response.function_call_arguments.delta",
                {**at, "delta": arguments[start : start + 7]},
            )
        yield "response.function_call_arguments.done", {**at, "arguments": arguments}
    yield "response.output_item.done", {"output_index": index, "item": item}


def _text_events(at: dict[str, Any], item: Item) -> Iterator[tuple[str, dict[str, Any]]]:
    for number, part in enumerate(item.get("content") or []):
        text = part.get("text", "")
        where = {**at, "content_index": number}
        yield "response.content_part.added", {**where, "part": {**part, "text": ""}}
        for start in range(0, len(text), 5):
            yield (
                "response.output_text.delta",
                {**where, "delta": text[start : start + 5], "logprobs": []},
            )
        yield "response.output_text.done", {**where, "text": text, "logprobs": []}
        yield "response.content_part.done", {**where, "part": part}


def _decoded(raw: bytes, encoding: str) -> bytes:
    """A request body as sent, without its `Content-Encoding` (zstd or gzip)."""
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return raw


def _responses_handler(fake: FakeResponses) -> type:
    """fake_server's handler, reading compressed bodies, keeping the bytes, answering GET."""
    base = _handler_for(fake)

    class Handler(base):  # type: ignore[valid-type,misc]
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            encoding = (self.headers.get("content-encoding") or "").strip().lower()
            try:
                body = json.loads(_decoded(raw, encoding) or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {key.lower(): value for key, value in self.headers.items()}
            request = ResponsesRequest("POST", self.path, headers, body, raw)
            if self.path.split("?")[0] not in fake.paths:
                fake._record(request)
                self._send(404, fake._error_body(404, self.path))
                return
            self._answer(fake._take(request), body)

        def _answer(self, reply: ResponsesReply, body: Any) -> None:
            if reply.delay and fake._stopping.wait(reply.delay):
                return  # the server is stopping: drop the hanging request
            streaming = isinstance(body, dict) and body.get("stream")
            if reply.status == 200 and reply.body is None and streaming:
                self._stream(fake.events(reply, body), reply.headers)
                return
            if reply.status == 200 and reply.failure is not None:
                self._send(400, fake._success_body(reply, body), reply.headers)
                return
            payload = reply.body if reply.body is not None else fake._success_body(reply, body)
            self._send(reply.status, payload, reply.headers)

        def do_GET(self) -> None:
            headers = {key.lower(): value for key, value in self.headers.items()}
            fake._record(ResponsesRequest("GET", self.path, headers, None))
            path = self.path.split("?")[0]
            if headers.get("upgrade", "").lower() == "websocket":
                self._send(
                    426, {"error": {"message": "Upgrade Required", "type": "invalid_request_error"}}
                )
            elif path == "/v1/models":
                model = {"id": "gpt-5.2-codex", "object": "model", "created": 0, "owned_by": "fake"}
                self._send(200, {"object": "list", "data": [model]})
            else:
                self._send(404, fake._error_body(404, self.path))

    return Handler
