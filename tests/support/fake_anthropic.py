"""A local fake of the Anthropic Messages API for tests: real HTTP on 127.0.0.1.

    server = FakeAnthropic().start()        # or the `fake_anthropic` pytest fixture
    server.script(Reply.overloaded(), Reply.text("the summary"))
    client = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)
    ...
    server.requests[0].body["model"]        # what the client sent
    server.stop()

`POST /v1/messages` answers with the scripted replies in order, then with `default`
(a plain success), each with its extra response headers (`Retry-After`, ...). Every
request is recorded. `tests/support/fake_openai.py` serves Chat Completions the same way;
both run on the one server of `tests/support/fake_server.py` (127.0.0.1, an ephemeral port,
a background thread: nothing here reaches the network).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tests.support.fake_server import FakeServer, RecordedRequest

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


class FakeAnthropic(FakeServer):
    """The fake Messages API. `script()` sets the replies; `requests` records what came in."""

    #: The one path the server answers.
    path = "/v1/messages"
    paths: tuple[str, ...] = (path,)

    def __init__(self, default: Reply | None = None) -> None:
        super().__init__(default or Reply.text())

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
