"""`RunReport`: what one compaction run tells the caller and the logs.

It collects the meta events (docs/behaviour.md#events, each also sent to the caller's `on_event`),
one `StepReport` per step of the chain, the reason the result names (the first failure, or the
rollback's) and writes the run's structured log records (`session_id`, `trigger`, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import FailureCause
from .options import EventHandler
from .results import CompactionEvent, EventPhase, StepReport
from .run_state import StepFailure

__all__ = ["RunReport"]

logger = logging.getLogger("compaction")


@dataclass
class RunReport:
    """The events, step reports, failure reason and log context of one run."""

    session_id: str | None = None
    trigger: str = "auto"
    on_event: EventHandler | None = None
    events: list[CompactionEvent] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    failure: str | None = None
    #: The last rollback's failure as fields (`CompactResult.failure`).
    cause: FailureCause | None = None
    rolled_back: bool = False

    def emit(self, phase: EventPhase, **fields: Any) -> None:
        """Record a meta event and pass it to `on_event` (whose failures are only logged)."""
        event = CompactionEvent(phase=phase, **fields)
        self.events.append(event)
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # an observer's bug must not change the compaction
            logger.exception("on_event handler failed for %s", phase, extra=self.log_fields())

    def step(
        self,
        step: str,
        *,
        ran: bool,
        changed: bool = False,
        before: int = 0,
        after: int | None = None,
        why: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Record what `step` did; a later report of the same step replaces the earlier one."""
        info = dict(detail or {})
        if why:
            info["why"] = why
        tokens_after = before if after is None else after
        report = StepReport(step, ran, changed, before, tokens_after, info)
        self.steps = [r for r in self.steps if r.step != step] + [report]

    def skip_rest(self, steps: Sequence[str], why: str) -> None:
        """Report every step of `steps` not reported yet as not run, because of `why`."""
        done = {report.step for report in self.steps}
        for step in steps:
            if step not in done:
                self.step(step, ran=False, why=why)

    def fail(self, reason: str) -> None:
        """Name `reason` in the result unless an earlier failure is named already."""
        self.failure = self.failure or reason

    def rollback(
        self, failure: StepFailure, tokens: int, steps: frozenset[str] | None = None
    ) -> None:
        """Record a rollback to a snapshot of `tokens` tokens; the reports of `steps`
        (default: all) that had changed something are marked rolled back."""
        self.failure = failure.reason
        self.cause = failure.cause
        self.rolled_back = True
        self.steps = [
            replace(r, changed=False, detail={**r.detail, "rolled_back": True})
            if r.changed and (steps is None or r.step in steps)
            else r
            for r in self.steps
        ]
        self.emit(
            "rollback",
            tokens_before=tokens,
            tokens_after=tokens,
            reason=failure.reason,
            detail={"detail": failure.detail} if failure.detail else {},
        )
        logger.warning(
            "compaction rolled back: %s %s",
            failure.reason,
            failure.detail,
            extra=self.log_fields(reason=failure.reason),
        )

    def log_fields(self, **fields: Any) -> dict[str, Any]:
        """The structured fields of a log record of this run, plus `fields`."""
        return {"session_id": self.session_id, "trigger": self.trigger, **fields}

    def log_outcome(
        self, outcome: str, before: int, after: int, duration: int, reason: str | None = None
    ) -> None:
        """The run's one outcome record: compacted, skipped or rolled_back."""
        logger.log(
            # A skip (below the threshold, nothing to compact, cooldown) is routine.
            logging.INFO if outcome in {"compacted", "skipped"} else logging.WARNING,
            "compaction %s: %d -> %d tokens in %d ms%s",
            outcome,
            before,
            after,
            duration,
            f" ({reason})" if reason else "",
            extra=self.log_fields(
                tokens_before=before,
                tokens_after=after,
                duration_ms=duration,
                outcome=outcome,
                reason=reason or self.failure,
                steps=[r.step for r in self.steps if r.ran],
            ),
        )
