"""`FakeClock`: a Clock for tests; sleeping advances time instantly and is recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["FakeClock"]


class FakeClock:
    """Starts at `start` (UTC); `sleep` and `advance` move both clocks forward."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 2, 17, 10, 15, 0, tzinfo=UTC)
        self.elapsed = 0.0
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self.current

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds
        self.current += timedelta(seconds=seconds)
