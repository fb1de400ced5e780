"""Is an upstream's error answer a refusal for length? (docs/behaviour.md#overflow-recovery)

`overflow_of(provider, status, body)` reads an error answer of any provider the proxy serves
and says whether the request was refused as too long for the model's window, with the
figures the message gives:

- Anthropic: 400 `invalid_request_error`, "prompt is too long: 250000 tokens > 200000
  maximum", or "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000";
- OpenAI Chat Completions and Responses: `code: context_length_exceeded` ("This model's
  maximum context length is 8192 tokens. However, your messages resulted in 12000 tokens"),
  as an error body or, streamed from the Responses API, a `response.failed` event whose
  `response.error` says it (status 200: the stream had started).

Provider-neutral: the Responses route calls it with its own provider name and its failed
event's data.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .streaming import SseParser

__all__ = ["Overflow", "leading_events", "overflow_of"]

_CODES: Final = frozenset({"context_length_exceeded"})
_ANTHROPIC_LONG: Final = re.compile(r"prompt is too long|exceed(?:s)? context limit", re.I)
_ANTHROPIC_FIGURES: Final = re.compile(r"(\d+) tokens > (\d+) maximum")
_ANTHROPIC_SUM: Final = re.compile(r"(\d+) \+ (\d+) > (\d+)")
_OPENAI_LIMIT: Final = re.compile(r"maximum context length is (\d+) tokens", re.I)
_OPENAI_COUNTED: Final = re.compile(r"(?:resulted in|requested) (\d+) tokens", re.I)


@dataclass(frozen=True, slots=True)
class Overflow:
    """A refusal for length: the upstream's message, its window (`limit`) and its count of
    the request (`counted`) when the message gives them, in the upstream's tokens."""

    provider: str
    message: str
    limit: int | None = None
    counted: int | None = None


def overflow_of(provider: str, status: int, body: Any) -> Overflow | None:
    """The overflow an upstream answer (`body`: bytes, text or decoded JSON) reports; None
    for any other answer."""
    data = _decoded(body)
    if not isinstance(data, Mapping):
        return None
    if data.get("type") == "response.failed" or data.get("status") == "failed":
        response = data.get("response") if data.get("type") == "response.failed" else data
        error = response.get("error") if isinstance(response, Mapping) else None
    elif status == 400:
        error = data.get("error")
    else:
        return None
    if not isinstance(error, Mapping):
        return None
    message = str(error.get("message") or "")
    if error.get("code") in _CODES or _OPENAI_LIMIT.search(message):
        return _openai(provider, message)
    if error.get("type") == "invalid_request_error" and _ANTHROPIC_LONG.search(message):
        return _anthropic(provider, message)
    return None


def _decoded(body: Any) -> Any:
    if isinstance(body, bytes | bytearray | str):
        try:
            return json.loads(body)
        except ValueError:
            return None
    return body


def _anthropic(provider: str, message: str) -> Overflow:
    figures = _ANTHROPIC_FIGURES.search(message)
    if figures:
        return Overflow(provider, message, limit=int(figures[2]), counted=int(figures[1]))
    parts = _ANTHROPIC_SUM.search(message)
    if parts:  # input + max_tokens > window: the input's room is the window minus max_tokens
        room = int(parts[3]) - int(parts[2])
        return Overflow(provider, message, limit=room, counted=int(parts[1]))
    return Overflow(provider, message)


def _openai(provider: str, message: str) -> Overflow:
    limit, counted = _OPENAI_LIMIT.search(message), _OPENAI_COUNTED.search(message)
    return Overflow(
        provider,
        message,
        limit=int(limit[1]) if limit else None,
        counted=int(counted[1]) if counted else None,
    )


#: Events a Responses stream opens with before it answers or fails.
_PRELUDE: Final = frozenset({"response.created", "response.in_progress", "response.queued"})


class _Events:
    """An accumulator of a stream's first events: their types, and the first after the
    prelude (`settled`)."""

    def __init__(self) -> None:
        self.settled: tuple[str, str] | None = None
        self.finished = False

    def feed(self, event: str, data: str) -> None:
        if self.settled is not None:
            return
        kind = event
        with contextlib.suppress(ValueError, AttributeError):
            kind = str(json.loads(data).get("type") or event)
        if kind not in _PRELUDE:
            self.settled = (kind, data)

    def answer(self) -> None:
        return None


async def leading_events(
    chunks: AsyncIterator[bytes], provider: str
) -> tuple[list[bytes], Overflow | None]:
    """Read a stream while it only opens (a Responses stream's `response.created`, ...):
    the chunks read, to be sent on, and the overflow when its first real event is a refusal
    for length (a streamed `response.failed`), which nothing was sent of yet."""
    events, read = _Events(), []
    parser = SseParser(events)
    async for chunk in chunks:
        read.append(chunk)
        parser.feed(chunk)
        if events.settled is not None:
            break
    if events.settled is None:
        return read, None
    kind, data = events.settled
    return read, overflow_of(provider, 200, data) if kind == "response.failed" else None
