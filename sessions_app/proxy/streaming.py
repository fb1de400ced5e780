"""Server-sent events read as they pass through, for the streaming recorder."""

from __future__ import annotations

import codecs

from .base import Accumulator

__all__ = ["SseParser"]


class SseParser:
    """Splits a byte stream into events (`event:` and `data:` lines) and feeds them on."""

    def __init__(self, accumulator: Accumulator) -> None:
        self.accumulator = accumulator
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buffer = ""

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes; every complete event goes to the accumulator."""
        self._buffer += self._decoder.decode(chunk).replace("\r\n", "\n").replace("\r", "\n")
        *events, self._buffer = self._buffer.split("\n\n")
        for event in events:
            self._event(event)

    def close(self) -> None:
        """The stream ended: a last event without its blank line still counts."""
        self._buffer += self._decoder.decode(b"", final=True)
        if self._buffer.strip():
            self._event(self._buffer)
        self._buffer = ""

    def _event(self, text: str) -> None:
        name, data = "", []
        for line in text.split("\n"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            self.accumulator.feed(name, "\n".join(data))
