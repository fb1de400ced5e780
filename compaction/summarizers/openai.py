"""`OpenAISummarizer`: summaries from a Chat Completions model through the official SDK.

Works against OpenAI, Azure OpenAI (its v1 endpoint as `base_url`, or an `AzureOpenAI`
client passed in) and any OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp
server, OpenRouter) by `base_url`. As with `AnthropicSummarizer`: the SDK is imported when
a summarizer is created (the `openai` extra), its own retries are off so the engine's loop
retries and counts attempts, no tools are offered, and every outcome that is not usable
text is a SummaryError with a stable reason.

`finish_reason` is mapped fully: `content_filter` and a `refusal` are the reason
`refusal`; `length` keeps the complete lines when they are usable; reasoning that some
servers return beside (`reasoning_content`, `reasoning`) or inside (`<think>`) the content
is never taken for the summary.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ..errors import SummaryError
from .base import SummaryRequest
from .prompt import SYSTEM_PROMPT, build_user_prompt
from .sdk import import_sdk, log_answer, log_request, status_error, strip_reasoning, usable_cut

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAISummarizer"]

logger = logging.getLogger("compaction")

DEFAULT_TIMEOUT_SECONDS: Final = 30.0
#: Servers that take OpenAI's `max_completion_tokens`; others get the older `max_tokens`,
#: which OpenAI-compatible servers understand. A server that rejects the one sent gets the
#: other once (`_switch_token_parameter`).
_COMPLETION_TOKENS_HOSTS: Final = ("api.openai.com", ".openai.azure.com", ".azure.com")
_NO_KEY: Final = "no-key"  # local servers need none, the SDK insists on one
_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")


class OpenAISummarizer:
    """Summaries from an OpenAI Chat Completions API or a compatible server.

    `api_key` and `base_url` default to OPENAI_API_KEY and OPENAI_BASE_URL; a server given
    by `base_url` may need no key. `max_tokens`, when given, replaces the request's cap.
    `client` lets a caller pass a ready `openai.OpenAI` (or `openai.AzureOpenAI`); a copy of
    it with the SDK's retries off is used. Raises ImportError naming the extra to install
    when the `openai` package is missing.
    """

    name: Final = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        client: openai.OpenAI | None = None,
    ) -> None:
        if not model:
            raise ValueError("OpenAISummarizer needs a model name")
        self._sdk: Any = import_sdk("openai", "OpenAISummarizer")
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._client_error = ""
        self._client: Any = None
        if client is not None:
            self._client = client.with_options(max_retries=0)
        else:
            self._client = self._new_client(api_key)
        self._token_parameter = _token_parameter(self._client_url())
        self._switched = False

    def _new_client(self, api_key: str | None) -> Any:
        key = api_key or os.environ.get("OPENAI_API_KEY") or (_NO_KEY if self.base_url else None)
        try:
            return self._sdk.OpenAI(
                api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
        except self._sdk.OpenAIError as error:  # no credentials: fail each request, clearly
            self._client_error = str(error)
            return None

    def _client_url(self) -> str:
        if self._client is None:
            return self.base_url or ""
        return str(getattr(self._client, "base_url", "") or self.base_url or "")

    def summarize(self, request: SummaryRequest) -> str:
        """One Chat Completions call; the summary text, or SummaryError with a reason."""
        if self._client is None:
            raise SummaryError("api_error", self._client_error, retryable=False, provider=self.name)
        max_tokens = self.max_tokens or request.max_tokens
        started = log_request(self.model, len(request.messages), max_tokens)
        response = self._create(request, max_tokens)
        choices = getattr(response, "choices", None) or []
        finish = getattr(choices[0], "finish_reason", None) if choices else None
        usage = getattr(response, "usage", None)
        log_answer(
            self.model,
            started,
            ("finish_reason", finish),
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
        )
        if not choices:
            raise SummaryError("content_none", "the answer has no choices")
        return completion_text(getattr(choices[0], "message", None), finish)

    def _create(self, request: SummaryRequest, max_tokens: int) -> Any:
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": build_user_prompt(request)},
        ]
        try:
            return self._send(messages, max_tokens)
        except self._sdk.BadRequestError as error:
            if not self._switch_token_parameter(error):
                raise self._mapped(error) from error
        try:  # the same request with the other token parameter: not a retry
            return self._send(messages, max_tokens)
        except self._sdk.OpenAIError as error:
            raise self._mapped(error) from error

    def _send(self, messages: list[dict[str, str]], max_tokens: int) -> Any:
        try:
            return self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                timeout=self.timeout,
                **{self._token_parameter: max_tokens},
            )
        except self._sdk.BadRequestError:
            raise
        except self._sdk.OpenAIError as error:
            raise self._mapped(error) from error

    def _switch_token_parameter(self, error: Any) -> bool:
        """Use the other token parameter (once) when the server rejected the one sent."""
        sent = self._token_parameter
        message = str(getattr(error, "message", "") or "")
        if self._switched or sent not in message:
            return False
        self._switched = True
        self._token_parameter = (
            "max_tokens" if sent == "max_completion_tokens" else "max_completion_tokens"
        )
        logger.info("%s rejected %s; sending %s", self.model, sent, self._token_parameter)
        return True

    def _mapped(self, error: Any) -> SummaryError:
        sdk = self._sdk
        name = self.name
        if isinstance(error, sdk.APITimeoutError):
            return SummaryError("timeout", f"no answer within {self.timeout} s", provider=name)
        if isinstance(error, sdk.APIConnectionError):
            return SummaryError("api_error", f"connection failed: {error}", provider=name)
        if isinstance(error, sdk.APIStatusError):
            code = getattr(error, "code", None) or getattr(error, "type", None)
            headers = error.response.headers
            return status_error(error.status_code, error.message, headers, code=code, provider=name)
        return SummaryError("api_error", str(error), retryable=False, provider=name)


def _token_parameter(url: str) -> str:
    host = urlsplit(url).hostname or ""
    if not url or any(host == h or host.endswith(h) for h in _COMPLETION_TOKENS_HOSTS):
        return "max_completion_tokens"
    return "max_tokens"


def completion_text(message: Any, finish_reason: str | None) -> str:
    """The text of a Chat Completions answer, or the SummaryError naming why there is none."""
    if finish_reason == "content_filter" or getattr(message, "refusal", None):
        detail = str(getattr(message, "refusal", None) or "the answer was filtered")
        raise SummaryError("refusal", detail, retryable=False)
    content = getattr(message, "content", None)
    reasoned = any(getattr(message, name, None) for name in _REASONING_FIELDS)
    if isinstance(content, list):  # some servers answer with content parts
        content = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    text, thought = strip_reasoning(content) if isinstance(content, str) else ("", False)
    if finish_reason == "length":
        kept = usable_cut(text)
        if kept is not None:
            logger.warning("summary was cut at max_tokens; keeping its complete lines")
            return kept
        raise SummaryError("max_tokens_no_content", "max_tokens reached before any usable text")
    if text:
        return text
    if reasoned or thought:
        raise SummaryError("thinking_only_no_content", "the answer holds only reasoning")
    if content is None:
        raise SummaryError("content_none", "the answer's content is null")
    raise SummaryError("empty_summary", "the answer's text is empty")
