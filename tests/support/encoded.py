"""Record every text the engine encodes or counts (tests of "counted once, not again").

Counts come from bpe-openai's counter (`compaction.tokens.text_counter`), encodes and cuts
from tiktoken; a test that watched only tiktoken's `encode_ordinary` would pass whatever the
engine counted. `recording_encodes()` watches both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import tiktoken

from compaction import tokens

__all__ = ["recording_encodes"]


@contextmanager
def recording_encodes() -> Iterator[list[str]]:
    """The texts encoded (tiktoken) or counted (the fast counter) inside the block, in order."""
    texts: list[str] = []
    original = tiktoken.Encoding.encode_ordinary
    fast_count = tokens._fast_count

    def encode(self: tiktoken.Encoding, text: str) -> list[int]:
        texts.append(text)
        return original(self, text)

    def recorded_fast(name: str) -> Callable[[str], int] | None:
        count = fast_count(name)
        if count is None:
            return None

        def recording(text: str) -> int:
            texts.append(text)
            return count(text)

        return recording

    patches: list[Any] = [
        mock.patch.object(tiktoken.Encoding, "encode_ordinary", encode),
        mock.patch.object(tokens, "_fast_count", recorded_fast),
    ]
    tokens._counter.cache_clear()  # counters are built again, through the recorders
    try:
        with patches[0], patches[1]:
            yield texts
    finally:
        tokens._counter.cache_clear()
