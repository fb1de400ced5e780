"""The words of a text that hold a `/` or a `.`: where paths, file names and URLs are.

The extractive summarizer and the retention check both look for paths word by word in the
same texts of a run's middle; within `words_remembered` (the summary step of a run) each
text is split once and its marked words kept until the step ends, for this thread or task
only (a context variable: runs in parallel keep their own).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["marked_words", "words_remembered"]

#: The marked words of each text, joined by spaces: one object a text, where a tuple of
#: word objects took a tenth of the history's JSON size more at the peak of a summary-only
#: compaction (bench/compact.py), for no measurable speed.
_REMEMBERED: ContextVar[dict[str, str] | None] = ContextVar("compaction_marked_words", default=None)


@contextmanager
def words_remembered() -> Iterator[None]:
    """Within the block, `marked_words` splits each text once."""
    token = _REMEMBERED.set({})
    try:
        yield
    finally:
        _REMEMBERED.reset(token)


def marked_words(text: str) -> list[str]:
    """`[word for word in text.split() if "/" in word or "." in word]`."""
    if "/" not in text and "." not in text:
        return []
    remembered = _REMEMBERED.get()
    if remembered is not None:
        known = remembered.get(text)
        if known is not None:  # one string, the words joined by spaces: a word has none
            return known.split(" ") if known else []
    found = [word for word in text.split() if "/" in word or "." in word]
    if remembered is not None:
        remembered[text] = " ".join(found)
    return found
