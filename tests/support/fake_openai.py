"""A local fake of the OpenAI Chat Completions API for tests: real HTTP on 127.0.0.1.

    server = FakeOpenAI().start()            # or the `fake_openai` pytest fixture
    server.script(ChatReply.rate_limited(retry_after_ms="250"), ChatReply.text("summary"))
    client = openai.OpenAI(api_key="test", base_url=server.base_url, max_retries=0)
    ...
    server.requests[0].body["messages"]      # what the client sent

`POST /v1/chat/completions` answers like `FakeAnthropic` (same recording, scripting,
headers and hangs); the replies are `Reply` values built by `ChatReply`, whose `content`
is the answer's message and `stop_reason` its `finish_reason`.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply

__all__ = ["ChatReply", "FakeOpenAI", "RecordedRequest", "Reply"]


class ChatReply:
    """Builders of Chat Completions replies."""

    @staticmethod
    def message(finish_reason: str | None = "stop", **message: Any) -> Reply:
        """A success whose message has the given fields (`content`, `refusal`, ...)."""
        return Reply(content={"role": "assistant", **message}, stop_reason=finish_reason)

    @classmethod
    def text(cls, text: str = "fake summary", *, finish_reason: str = "stop") -> Reply:
        return cls.message(finish_reason, content=text)

    @classmethod
    def content_null(cls) -> Reply:
        return cls.message("stop", content=None)

    @classmethod
    def empty_text(cls) -> Reply:
        return cls.message("stop", content="  ")

    @classmethod
    def length_no_text(cls) -> Reply:
        return cls.message("length", content="")

    @classmethod
    def refusal(cls) -> Reply:
        return cls.message("stop", content=None, refusal="I can't help with that.")

    @classmethod
    def content_filter(cls, text: str = "") -> Reply:
        return cls.message("content_filter", content=text or None)

    @classmethod
    def reasoning_only(cls, field: str = "reasoning_content") -> Reply:
        """Reasoning beside an empty content (vLLM, DeepSeek, OpenRouter, Ollama)."""
        return cls.message("stop", content="", **{field: "Let me think."})

    @classmethod
    def think_tags_only(cls) -> Reply:
        """Reasoning left in the content as `<think>` tags (llama.cpp, Ollama)."""
        return cls.message("stop", content="<think>Let me think.</think>\n")

    @classmethod
    def no_choices(cls) -> Reply:
        return Reply(body={"id": "x", "object": "chat.completion", "model": "m", "choices": []})

    @staticmethod
    def error(status: int, message: str, *, code: str | None = None, kind: str = "") -> Reply:
        """An API error with OpenAI's error body."""
        error = {"message": message, "type": kind or "invalid_request_error", "param": None}
        return Reply(status=status, body={"error": {**error, "code": code}})

    @classmethod
    def context_exceeded(cls) -> Reply:
        return cls.error(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 12000 tokens.",
            code="context_length_exceeded",
        )

    @classmethod
    def rate_limited(cls, **headers: str) -> Reply:
        """429; `headers` with `_` for `-`, e.g. `retry_after="7"`, `retry_after_ms="250"`."""
        reply = cls.error(429, "Rate limit reached", code="rate_limit_exceeded", kind="requests")
        return reply.with_headers(**headers)

    @classmethod
    def overloaded(cls, status: int = 503) -> Reply:
        return cls.error(status, "The server is overloaded", kind="server_error")

    @staticmethod
    def hang(seconds: float = 5.0) -> Reply:
        return Reply(content={"role": "assistant", "content": "too late"}, delay=seconds)


class FakeOpenAI(FakeAnthropic):
    """The fake Chat Completions server; `base_url` ends with `/v1`, as the SDK expects."""

    path = "/v1/chat/completions"
    paths: tuple[str, ...] = (path,)
    url_suffix = "/v1"

    def __init__(self, default: Reply | None = None) -> None:
        super().__init__(default or ChatReply.text())

    def _error_body(self, status: int, message: str) -> Any:
        return ChatReply.error(status, message).body

    def _success_body(self, reply: Reply, request_body: Any) -> dict[str, Any]:
        model = request_body.get("model", "fake") if isinstance(request_body, dict) else "fake"
        return {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "message": reply.content, "finish_reason": reply.stop_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
