"""The summarizer protocol and the request it receives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..messages import Message

__all__ = ["Summarizer", "SummaryRequest"]


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize and how: the middle messages, a token cap and optional guidance.

    `messages` may hold earlier summary messages: a summarizer merges them into the new
    summary (multi-level compaction) rather than nesting them.
    `required_identifiers` lists identifiers a first summary lost (retention check): the
    summarizer must keep them verbatim this time.
    `part` is (index, count) when the middle was too large for one request
    (`Policy.summary_input_limit`) and `messages` is one part of it: the part summaries are
    merged afterwards.
    `state_block` is the session state the engine appends to the summary verbatim
    (`compaction.state_block`): the summarizer writes the narrative around it.
    """

    messages: Sequence[Message]
    max_tokens: int = 1000
    instructions: str | None = None
    required_identifiers: tuple[str, ...] = ()
    encoding: str | None = None
    part: tuple[int, int] | None = None
    state_block: str = ""


@runtime_checkable
class Summarizer(Protocol):
    """Turns a span of messages into summary text, or raises SummaryError with a reason."""

    @property
    def name(self) -> str:
        """Shown in the web app and stored with each compaction, e.g. `extractive`."""
        ...

    def summarize(self, request: SummaryRequest) -> str: ...
