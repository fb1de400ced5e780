"""`ScriptedSummarizer`: a fake for tests and for library users' own tests.

Like simonw/llm's mock model: it answers from a script, in order, and records every request.
A script item is a summary string, an exception to raise (usually a SummaryError), or a
callable that gets the request and returns the summary.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TypeAlias

from .base import SummaryRequest

__all__ = ["ScriptItem", "ScriptedSummarizer"]

ScriptItem: TypeAlias = str | BaseException | Callable[[SummaryRequest], str]


class ScriptedSummarizer:
    """Returns or raises its scripted items in order; `requests` holds what it was asked.

    When the script is used up it answers `default` (if given), else raises RuntimeError.
    """

    def __init__(
        self, *script: ScriptItem, default: ScriptItem | None = None, name: str = "scripted"
    ) -> None:
        self._script: deque[ScriptItem] = deque(script)
        self.default = default
        self.name = name
        self.requests: list[SummaryRequest] = []

    def enqueue(self, *items: ScriptItem) -> None:
        """Append items to the script."""
        self._script.extend(items)

    @property
    def remaining(self) -> int:
        """How many scripted items are still unused."""
        return len(self._script)

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self._script:
            item = self._script.popleft()
        elif self.default is not None:
            item = self.default
        else:
            raise RuntimeError(
                f"ScriptedSummarizer script is used up after {len(self.requests) - 1} request(s)"
            )
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return item(request)
        return item
