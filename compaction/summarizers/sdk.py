"""What the API summarizers share: importing their SDK lazily, and reading an HTTP answer
into a `SummaryError` (retry hints, context-window errors) or a usable summary text; the two
log records of every call (`log_request`, `log_answer`).

The SDKs are optional dependencies (extras of the `ctxweb` package): `import compaction`
never imports them; a summarizer imports its SDK when it is created and, when the SDK is
missing, says which extra to install.
"""

from __future__ import annotations

import email.utils
import importlib
import logging
import math
import re
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Final

from ..errors import SummaryError
from .prompt import CUT_MARKER

__all__ = [
    "RETRYABLE_STATUS_CODES",
    "import_sdk",
    "log_answer",
    "log_request",
    "retry_after_seconds",
    "status_error",
    "strip_reasoning",
    "usable_cut",
]

logger = logging.getLogger("compaction")

#: Statuses worth another attempt: rate limits, timeouts, conflicts, server errors, overload.
RETRYABLE_STATUS_CODES: Final = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: How the servers say a request is larger than the model's context window: Anthropic's
#: "prompt is too long", OpenAI's `context_length_exceeded`, vLLM's "maximum context
#: length", llama.cpp's `exceed_context_size_error`, and their relatives.
_CONTEXT_CODES: Final = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_MESSAGE: Final = re.compile(
    r"prompt is too long|context[ _]length|context window|maximum context|context size"
    r"|too many (?:input )?tokens|input is too long|exceeds? the (?:available )?context",
    re.IGNORECASE,
)
_CONTEXT_HINT: Final = " (lower the policy's summary_input_limit to this model's window)"
_THINK: Final = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.DOTALL)


def import_sdk(module: str, summarizer: str) -> ModuleType:
    """The SDK `module`, or an ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{summarizer} needs the {module!r} package, which is not installed: "
            f"pip install 'ctxweb[{module}]'",
            name=module,
        ) from error


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a server asked for: `retry-after-ms`, else `Retry-After` (seconds or an
    HTTP date); None when it names none. Header names are matched case-insensitively."""
    if not headers:
        return None
    lowered = {str(name).lower(): str(value) for name, value in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(name, "").strip()
        if not value:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            seconds = _http_date_wait(value) if name == "retry-after" else math.nan
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _http_date_wait(value: str) -> float:
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return math.nan
    return moment.timestamp() - time.time()


def status_error(
    status: int,
    message: str,
    headers: Mapping[str, str] | None,
    *,
    code: str | None = None,
    provider: str | None = None,
) -> SummaryError:
    """The SummaryError for an HTTP error answer, its `status`, `retry_after` and `provider`
    as fields (its text reads `HTTP {status}: {message}`).

    A request larger than the model's window is `context_exceeded` (never retried: the
    same request would fail again). Anything else is `api_error`, retryable for the
    statuses of RETRYABLE_STATUS_CODES unless the server's `x-should-retry` says otherwise,
    with the server's `Retry-After` as `retry_after`.
    """
    if status == 413 or (
        status in {400, 422} and (code in _CONTEXT_CODES or _CONTEXT_MESSAGE.search(message))
    ):
        return SummaryError(
            "context_exceeded",
            message + _CONTEXT_HINT,
            retryable=False,
            status=status,
            provider=provider,
        )
    lowered = {str(k).lower(): str(v).strip().lower() for k, v in (headers or {}).items()}
    should_retry = lowered.get("x-should-retry")
    if should_retry in {"true", "false"}:
        retryable = should_retry == "true"
    else:
        retryable = status in RETRYABLE_STATUS_CODES
    return SummaryError(
        "api_error",
        message,
        retryable=retryable,
        retry_after=retry_after_seconds(headers),
        status=status,
        provider=provider,
    )


def usable_cut(text: str) -> str | None:
    """What to keep of a summary cut at its token limit, or None when nothing is usable.

    The last line was cut mid-way and is dropped; what remains is usable when it holds at
    least one line that is not a heading. The kept text ends with CUT_MARKER, so the cut
    is visible to the agent and to whoever reads the summary.
    """
    lines = text.strip().splitlines()
    complete = lines if text.endswith("\n") else lines[:-1]
    while complete and not complete[-1].strip():
        complete.pop()
    if not any(_is_content(line) for line in complete):
        return None
    return "\n".join(complete) + f"\n{CUT_MARKER}"


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and (stripped.startswith(("-", "*")) or not stripped.endswith(":"))


def strip_reasoning(text: str) -> tuple[str, bool]:
    """`text` without `<think>...</think>` spans (some OpenAI-compatible servers leave the
    model's reasoning in the content), and whether there were any. An unclosed span (the
    answer was cut while thinking) runs to the end."""
    stripped, count = _THINK.subn("", text)
    return stripped.strip(), count > 0


def log_request(model: str, message_count: int, max_tokens: int) -> float:
    """Log a summary request about to be sent; the `time.monotonic()` it was sent at."""
    logger.info(
        "requesting summary of %d messages from %s",
        message_count,
        model,
        extra={"model": model, "max_tokens": max_tokens},
    )
    return time.monotonic()


def log_answer(
    model: str, started: float, reason: tuple[str, Any], input_tokens: Any, output_tokens: Any
) -> None:
    """Log a summary answer: its time since `started` and `reason` ((the API's name for its
    stop reason, the value)); the usage as the API reported it."""
    elapsed_ms = round((time.monotonic() - started) * 1000)
    name, value = reason
    logger.info(
        f"summary answer from %s in %d ms ({name} %s)",
        model,
        elapsed_ms,
        value,
        extra={
            "model": model,
            "duration_ms": elapsed_ms,
            "stop_reason": value,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        },
    )
