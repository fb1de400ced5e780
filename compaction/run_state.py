"""What the steps of one compaction run hand each other: a candidate context with its token
counts (`ContextState`), and a step's failure (`StepFailure`), which rolls back."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .errors import FailureCause
from .messages import Message
from .tokens import message_token_counts

__all__ = ["ContextState", "StepFailure"]


@dataclass(frozen=True)
class ContextState:
    """A candidate context and its per-message token counts."""

    messages: list[Message]
    counts: list[int]

    @cached_property
    def tokens(self) -> int:
        """The total of `counts` (summed once: a run asks for it again and again)."""
        return sum(self.counts)

    def then(self, messages: list[Message], encoding: str) -> ContextState:
        """The state of `messages`, re-counting only the messages that are new objects."""
        known = {id(m): c for m, c in zip(self.messages, self.counts, strict=True)}
        fresh = iter(message_token_counts([m for m in messages if id(m) not in known], encoding))
        return ContextState(
            messages, [known[id(m)] if id(m) in known else next(fresh) for m in messages]
        )


class StepFailure(Exception):
    """A step failed: roll back, record `reason` (and `detail` in the rollback event).

    `cause` is the failure as fields (`CompactResult.failure`); by default the reason with
    `detail` as its message."""

    def __init__(self, reason: str, detail: str = "", cause: FailureCause | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.cause = cause or FailureCause(reason, detail)
