"""The words of a text that hold a `/` or a `.`: where paths, file names and URLs are.

The extractive summarizer and the retention check both look for paths word by word in the
same texts of a run's middle; within `words_remembered` (the summary step of a run) each
text is split once and its marked words kept until the step ends, for this thread or task
only (a context variable: runs in parallel keep their own). The words are a tuple, so the
callers can share them as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["marked_words", "words_remembered"]

#: The marked words of each text (an immutable tuple: every caller gets the same one).
_REMEMBERED: ContextVar[dict[str, tuple[str, ...]] | None] = ContextVar(
    "compaction_marked_words", default=None
)


@contextmanager
def words_remembered() -> Iterator[None]:
    """Within the block, `marked_words` splits each text once."""
    token = _REMEMBERED.set({})
    try:
        yield
    finally:
        _REMEMBERED.reset(token)


def marked_words(text: str) -> tuple[str, ...]:
    """`tuple(word for word in text.split() if "/" in word or "." in word)`."""
    if "/" not in text and "." not in text:
        return ()
    remembered = _REMEMBERED.get()
    if remembered is None:
        return tuple([word for word in text.split() if "/" in word or "." in word])
    known = remembered.get(text)
    if known is None:
        known = tuple([word for word in text.split() if "/" in word or "." in word])
        remembered[text] = known
    return known
