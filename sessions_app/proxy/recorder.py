"""Recording the answer: from a whole response body, or from a stream as it passes through."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import httpx

from sessions_app.services.proxying.turns import ProxyPlan, record_answer

from ..unstorable import clean
from .base import Adapter, Answer
from .connections import step
from .digests import digest
from .streaming import SseParser

__all__ = ["Recording", "relay"]

logger = logging.getLogger("sessions_app")


@dataclass(frozen=True)
class Recording:
    """Where an answer goes: the plan of its request, and how to read it."""

    adapter: Adapter
    plan: ProxyPlan
    compact: bool
    #: Served by the ASGI server: the step runs on the proxy's threads (proxy/connections.py).
    asgi: bool = False

    def answer_of(self, body: bytes, content_type: str) -> Answer | None:
        """The answer in a whole (non-streamed or buffered) response body."""
        if content_type.startswith("text/event-stream"):
            accumulator = self.adapter.accumulator()
            parser = SseParser(accumulator)
            parser.feed(body)
            parser.close()
            return accumulator.answer()
        try:
            decoded = json.loads(body)
        except ValueError:
            return None
        return self.adapter.answer(decoded) if isinstance(decoded, dict) else None

    async def store(self, answer: Answer | None) -> None:
        """Record the answer; a failure is logged, never raised (the client has its answer)."""
        if answer is None:
            return
        try:
            stored = await step(record_answer, asgi=self.asgi)(
                self.plan.session_id,
                self.plan.stored,
                clean(answer.canonical),  # stored as imports store it: no NUL, U+FFFD
                digest(answer.client),
                compact=self.compact,
                profile=self.plan.profile,
                request=self.plan.request,
            )
        except Exception:
            logger.exception(
                "proxy: the answer could not be recorded",
                extra={"session_id": str(self.plan.session_id)},
            )
            return
        if not stored:
            logger.info(
                "proxy: answer not recorded, the session moved on",
                extra={"session_id": str(self.plan.session_id)},
            )


async def relay(
    owned: httpx.AsyncClient | None,
    upstream: httpx.Response,
    recording: Recording | None,
    *,
    read: Sequence[bytes] = (),
    rest: AsyncIterator[bytes] | None = None,
) -> AsyncIterator[bytes]:
    """Each upstream chunk as it arrives. The answer is recorded when the stream's last event
    came, before that last chunk goes out: a client that sends its next request as soon as
    it has read the answer finds it stored. `owned`: a client of this request alone, closed
    at the end (the pooled one stays open). `read`, `rest`: the chunks already read of a
    stream whose opening was looked at (proxy/overflow.py `leading_events`), and its rest."""
    accumulator = recording.adapter.accumulator() if recording is not None else None
    parser = SseParser(accumulator) if accumulator is not None else None
    try:
        async for chunk in _chained(read, rest or upstream.aiter_bytes()):
            if parser is not None and accumulator is not None and recording is not None:
                try:
                    parser.feed(chunk)
                except Exception:  # the recorder never breaks the stream
                    logger.exception("proxy: a streamed event could not be read")
                    parser = None
                if parser is not None and accumulator.finished:
                    await recording.store(accumulator.answer())
                    parser = None
            yield chunk
    finally:
        await upstream.aclose()
        if owned is not None:
            await owned.aclose()


async def _chained(read: Sequence[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in read:
        yield chunk
    async for chunk in rest:
        yield chunk
