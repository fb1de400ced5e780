"""The compaction threshold over time, as steps of the token timeline.

Each compaction record keeps the threshold in force when it ran (`threshold_tokens`); the
timeline draws that threshold up to the compaction that recorded it, changing where two
compactions recorded different ones, and the current profile's threshold after the last
one. Compactions that recorded none (imported ones) leave the line as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sessions_app.models import Compaction

__all__ = ["ThresholdSegment", "threshold_segments"]


@dataclass(frozen=True)
class ThresholdSegment:
    """One horizontal stretch of the threshold line: where it is and what it says."""

    x1: float
    x2: float
    y: float
    tokens: int
    #: Compaction numbers that ran under it (none: the current profile's, after them all).
    numbers: tuple[int, ...] = ()
    current: bool = False

    @property
    def description(self) -> str:
        """What the stretch means, for its tooltip and screen readers."""
        text = f"Compaction threshold {self.tokens:,} tokens"
        if self.current and not self.numbers:
            return f"{text}: the current profile's"
        if len(self.numbers) == 1:
            text += f", in force for compaction #{self.numbers[0]}"
        elif self.numbers:
            text += f", in force for compactions #{self.numbers[0]} to #{self.numbers[-1]}"
        return text + (" and now" if self.current else "")


def threshold_segments(
    drops: Sequence[tuple[float, Compaction]],
    current: int,
    *,
    left: float,
    right: float,
    y: Callable[[float], float],
) -> list[ThresholdSegment]:
    """The steps of the threshold line from `left` to `right`, given each compaction's x
    (in time order) and the `current` threshold, merged where the threshold is the same."""
    known = [(x, c) for x, c in drops if c.threshold_tokens is not None]
    spans: list[tuple[float, float, int, tuple[int, ...], bool]] = []
    start = left
    for x, compaction in known:
        tokens = int(compaction.threshold_tokens or 0)
        if spans and spans[-1][2] == tokens:
            first, _, _, numbers, _ = spans.pop()
            spans.append((first, x, tokens, (*numbers, compaction.number), False))
        else:
            spans.append((start, x, tokens, (compaction.number,), False))
        start = x
    if spans and spans[-1][2] == current:
        first, _, _, numbers, _ = spans.pop()
        spans.append((first, right, current, numbers, True))
    else:
        spans.append((start, right, current, (), True))
    return [
        ThresholdSegment(x1, x2, y(tokens), tokens, numbers, now)
        for x1, x2, tokens, numbers, now in spans
    ]
