"""The wall-clock budget of a compaction's summarizer phase (issue 10).

`Policy.summary_time_budget_seconds` bounds the whole phase: the first attempt, the retries
with their backoff and the retention check's second request. An attempt that is running is
not interrupted (each has the summarizer's own timeout); once the budget is spent, no
further attempt starts and the compaction fails with the reason `time_budget`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .clock import Clock
from .errors import SummaryError

__all__ = ["TimeBudget"]


@dataclass
class TimeBudget:
    """`seconds` of wall-clock time from its creation, as `clock` tells it."""

    clock: Clock
    seconds: float
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock.monotonic()

    def restart(self) -> None:
        """Start the budget again from now (the summarizer phase starts)."""
        self.started = self.clock.monotonic()

    @property
    def elapsed(self) -> float:
        return self.clock.monotonic() - self.started

    def check(self, wait: float = 0.0) -> None:
        """Raise SummaryError `time_budget` (not retryable) when an attempt starting after
        `wait` more seconds would start at or past the end of the budget."""
        elapsed = self.elapsed
        if elapsed + wait >= self.seconds:
            raise SummaryError(
                "time_budget",
                f"{elapsed:.1f} s spent (+{wait:g} s backoff) of a {self.seconds:g} s "
                "summary budget",
                retryable=False,
            )
