"""`CallerSummary`: the summary a caller already wrote, as a summarizer.

An agent may write its own summary of the span it wants compacted (a `compress_context`
tool call, for example); the engine still places it, marks it and checks it like any other
summary. `name` is recorded with the compaction, so the record says the caller wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import SummaryRequest

__all__ = ["CallerSummary"]


@dataclass(frozen=True)
class CallerSummary:
    """Answers every request with `text`, the caller's own summary of the middle."""

    text: str
    name: str = "caller"

    def summarize(self, request: SummaryRequest) -> str:  # noqa: ARG002 (the protocol's)
        """`text`, whatever the request (the caller summarized the span already)."""
        return self.text
