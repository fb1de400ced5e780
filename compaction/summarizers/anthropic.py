"""`AnthropicSummarizer`: summaries from a Messages API model through the official SDK.

The SDK is imported when a summarizer is created, not with `compaction` (it is the
`anthropic` extra). Its own retries are off (`max_retries=0`, also on a client passed in,
through `client.with_options`): `compact_messages` retries with its own backoff, honouring
the server's `Retry-After`, and counts attempts, so a retry is never hidden inside one
attempt. No tools are offered. Every outcome that is not usable text becomes a
SummaryError with a stable reason: `refusal` for a refusal, `context_exceeded` for a
request over the model's window, and the reasons of `summary_text`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import SummaryError
from .base import SummaryRequest
from .prompt import SYSTEM_PROMPT, build_user_prompt
from .sdk import (
    RETRYABLE_STATUS_CODES,
    import_sdk,
    log_answer,
    log_request,
    status_error,
    usable_cut,
)

if TYPE_CHECKING:
    import anthropic

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "RETRYABLE_STATUS_CODES", "AnthropicSummarizer"]

logger = logging.getLogger("compaction")

DEFAULT_TIMEOUT_SECONDS: Final = 30.0
_THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})


class AnthropicSummarizer:
    """Summaries from an Anthropic-compatible Messages API.

    `api_key` and `base_url` default to ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL.
    `max_tokens`, when given, replaces the request's cap (the policy's summary_max_tokens,
    1000 by default). `client` lets a caller pass a ready `anthropic.Anthropic`; a copy of
    it with the SDK's retries off is used. Raises ImportError naming the extra to install
    when the `anthropic` package is missing.
    """

    name: Final = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        if not model:
            raise ValueError("AnthropicSummarizer needs a model name")
        self._sdk: Any = import_sdk("anthropic", "AnthropicSummarizer")
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        if client is not None:
            self._client = client.with_options(max_retries=0)
        else:
            self._client = self._sdk.Anthropic(
                api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or None,
                base_url=self.base_url,
                timeout=timeout,
                max_retries=0,
            )

    def summarize(self, request: SummaryRequest) -> str:
        """One Messages API call; the summary text, or SummaryError with a reason."""
        max_tokens = self.max_tokens or request.max_tokens
        started = log_request(self.model, len(request.messages), max_tokens)
        response = self._create(request, max_tokens)
        stop_reason = getattr(response, "stop_reason", None)
        usage = getattr(response, "usage", None)
        log_answer(
            self.model,
            started,
            ("stop_reason", stop_reason),
            getattr(usage, "input_tokens", None),
            getattr(usage, "output_tokens", None),
        )
        return summary_text(getattr(response, "content", None), stop_reason)

    def _create(self, request: SummaryRequest, max_tokens: int) -> Any:
        sdk = self._sdk
        try:
            return self._client.messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=SYSTEM_PROMPT,
                messages=[{"role": "user", "content": build_user_prompt(request)}],
                timeout=self.timeout,
            )
        except sdk.APITimeoutError as error:
            raise SummaryError(
                "timeout", f"no answer within {self.timeout} s", provider=self.name
            ) from error
        except sdk.APIConnectionError as error:
            raise SummaryError(
                "api_error", f"connection failed: {error}", provider=self.name
            ) from error
        except sdk.APIStatusError as error:
            details = error.body.get("error") if isinstance(error.body, dict) else None
            code = details.get("type") if isinstance(details, dict) else None
            headers = error.response.headers
            raise status_error(
                error.status_code, error.message, headers, code=code, provider=self.name
            ) from error
        except sdk.AnthropicError as error:  # credentials, bad response shape, ...
            raise SummaryError(
                "api_error", str(error), retryable=False, provider=self.name
            ) from error


def summary_text(content: Sequence[Any] | None, stop_reason: str | None) -> str:
    """The text of a Messages API answer, or the SummaryError naming why there is none.

    A refusal is never a summary. An answer cut at `max_tokens` (or at the model's
    window) keeps its complete lines when they are usable (`sdk.usable_cut`).
    """
    if stop_reason == "refusal":
        raise SummaryError("refusal", "the model refused to summarize", retryable=False)
    if content is None:
        raise SummaryError("content_none", "the answer's content is null")
    kinds = [getattr(block, "type", None) for block in content]
    texts = [
        str(getattr(block, "text", "") or "")
        for block in content
        if getattr(block, "type", None) == "text"
    ]
    text = "\n".join(texts).strip()
    if stop_reason in {"max_tokens", "model_context_window_exceeded"}:
        kept = usable_cut(text)
        if kept is not None:
            logger.warning("summary was cut at %s; keeping its complete lines", stop_reason)
            return kept
        if stop_reason == "model_context_window_exceeded":
            raise SummaryError(
                "context_exceeded", "the model's context window ran out", retryable=False
            )
        raise SummaryError("max_tokens_no_content", "max_tokens reached before any usable text")
    if text:
        return text
    if not kinds:
        raise SummaryError("content_none", "the answer has no content blocks")
    if all(kind in _THINKING_TYPES for kind in kinds):
        raise SummaryError("thinking_only_no_content", "the answer holds only thinking blocks")
    raise SummaryError("empty_summary", "the answer's text is empty")
