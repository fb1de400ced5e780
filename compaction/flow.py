"""`compact_messages`: the one-call compaction and the order of its chain
(docs/behaviour.md#compaction-flow; docs/architecture.md, "Engine").

The policy's chain runs in order: offload (when a target is given), selective pruning and
the summary (one transaction: they commit together or roll back together,
docs/behaviour.md#transactions-and-rollback), then the fallbacks smart truncation and hard
truncation, which run only when they are needed
(docs/behaviour.md#hard-truncation, #compaction-flow). The input is never mutated; untouched
messages keep their identity. A summarizer failure never raises: the result says `compacted=False`
and names the reason.

This module holds the order and the commit; the steps live in `chain_steps` and
`summary_step`, the events, step reports and log records in `report`. The summary step
returns a frozen `SummaryOutcome`: the run keeps it when the transaction commits, and a
rollback drops it. The summary message also holds the folded outlines of the files viewed
in the middle; `CompactResult.summary` is the summarizer's text alone.

Same-role neighbours the chain made are merged last (`alternation.py`), so an alternating
input gives an alternating output: a summary followed by a user message absorbs it (the
merged message is the summary message; `partition` is the split before merging). A merged
original is not in the output as itself: it is archived and counted as compacted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from .alternation import merge_groups, merge_run, sources_by_identity
from .archive import archive_messages
from .blobstore import BlobStore
from .chain_steps import over_hard_limit, over_threshold, run_fallback, run_offload, run_selective
from .clock import Clock, SystemClock
from .errors import CompactionError
from .messages import SUMMARY_KEY, Message
from .options import CompactOptions, EventHandler
from .policy import Policy
from .report import RunReport
from .results import NOT_NEEDED, CompactResult, CompactStats
from .run_state import ContextState, StepFailure
from .summarizers.base import Summarizer
from .summarizers.extractive import ExtractiveSummarizer
from .summary_step import SummaryOutcome, SummaryStep
from .time_budget import TimeBudget
from .tokens import message_token_counts
from .validation import ensure_valid, validate_messages, validation_scope

__all__ = ["compact_messages"]

logger = logging.getLogger("compaction")

_TRANSACTION: Final = frozenset({"selective", "summary"})
#: Reasons that end a run before it starts: no "compaction_done" event, no outcome record.
_NOT_STARTED: Final = frozenset({"empty", "disabled", "below_threshold", "reserved_over_threshold"})


def compact_messages(  # noqa: PLR0913 (the documented keyword signature)
    messages: Sequence[Message],
    policy: Policy | None = None,
    *,
    options: CompactOptions | None = None,
    summarizer: Summarizer | None = None,
    archive_dir: str | os.PathLike[str] | None = None,
    archive_store: BlobStore | None = None,
    archive_sequence: int | None = None,
    session_id: str | None = None,
    instructions: str | None = None,
    on_event: EventHandler | None = None,
    clock: Clock | None = None,
    force: bool | None = None,
    trigger: str | None = None,
    offload_dir: str | os.PathLike[str] | None = None,
    offload_store: BlobStore | None = None,
    token_counts: Sequence[int] | None = None,
) -> CompactResult:
    """Compact `messages` when they reach the policy's threshold (always, with `force`).

    The run's options come as one `CompactOptions` (`options=`) or as keywords of the same
    names; a keyword that is given (not None) overrides the field of `options`. See
    `CompactOptions` for what each does.

    Raises InvalidMessagesError for invalid input, ValueError when `token_counts` does not
    hold one count per message. Otherwise never raises: every failure rolls back to the
    input and is named in `result.reason`.
    """
    chosen = (options or CompactOptions()).with_given(
        summarizer=summarizer,
        archive_dir=archive_dir,
        archive_store=archive_store,
        archive_sequence=archive_sequence,
        session_id=session_id,
        instructions=instructions,
        on_event=on_event,
        clock=clock,
        force=force,
        trigger=trigger,
        offload_dir=offload_dir,
        offload_store=offload_store,
        token_counts=token_counts,
    )
    with validation_scope():  # the steps validate the same messages again: once is enough
        ensure_valid(messages)
        return _Flow.start(policy or Policy(), chosen).execute(messages)


@dataclass
class _Flow:
    """One run: the chain in order, the pruning + summary transaction and the commit."""

    policy: Policy
    options: CompactOptions
    clock: Clock
    archive: BlobStore | None
    report: RunReport
    summary_step: SummaryStep
    summary: SummaryOutcome | None = None
    archive_path: str | None = None

    @classmethod
    def start(cls, policy: Policy, options: CompactOptions) -> _Flow:
        clock = options.clock or SystemClock()
        report = RunReport(options.session_id, options.trigger, options.on_event)
        step = SummaryStep(
            policy,
            options.summarizer or ExtractiveSummarizer(),
            clock,
            report,
            instructions=options.instructions,
            force=options.force,
            budget=TimeBudget(clock, policy.summary_time_budget_seconds),
        )
        return cls(policy, options, clock, options.archive_target, report, step)

    def execute(self, messages: Sequence[Message]) -> CompactResult:
        started = self.clock.monotonic()
        original = self._original(messages)
        skip = self._skip_reason(original)
        if skip:
            logger.debug("compaction skipped: %s", skip, extra=self.report.log_fields(reason=skip))
            return self._unchanged(messages, original, skip, started)
        self._started(original)
        state = self._chain(original)
        if state is not original:
            state = self._checked(original, self._alternating(original, state))
        if state is original:
            reason = self.report.failure or "nothing_to_compact"
            return self._unchanged(messages, original, reason, started)
        self._archive(original, state)
        return self._result(original, state, started)

    def _original(self, messages: Sequence[Message]) -> ContextState:
        given = self.options.token_counts
        counts = list(given) if given is not None else None
        if counts is not None and len(counts) != len(messages):
            raise ValueError("token_counts must hold one count per message")
        return ContextState(
            list(messages), counts or message_token_counts(messages, self.policy.encoding)
        )

    def _skip_reason(self, original: ContextState) -> str | None:
        if not original.messages:
            return "empty"
        if self.options.force:
            return None
        if not self.policy.enabled:
            return "disabled"
        if not self.policy.over_threshold(original.tokens):
            return "below_threshold"
        if self.policy.over_threshold(0):  # no compaction of the messages can help
            return "reserved_over_threshold"
        return None

    def _started(self, original: ContextState) -> None:
        self.report.emit("compaction_start", tokens_before=original.tokens)
        logger.info(
            "compaction started: %d messages, %d tokens (threshold %d of %d)",
            len(original.messages),
            original.tokens,
            self.policy.threshold,
            self.policy.context_limit,
            extra=self.report.log_fields(
                tokens_before=original.tokens,
                message_count=len(original.messages),
                threshold=self.policy.threshold,
                context_limit=self.policy.context_limit,
                policy=self.policy.name,
            ),
        )

    def _chain(self, state: ContextState) -> ContextState:
        policy, report = self.policy, self.report
        steps = policy.steps
        summary_failed = False
        for step in steps:
            if step == "offload":
                state = run_offload(state, policy, self.options, report)
                if not self.options.force and not over_threshold(policy, state):
                    report.skip_rest(steps, "offload brought the context under the threshold")
                    return state
            elif step == "summary" or (step == "selective" and "summary" not in steps):
                state, summary_failed = self._transaction(state)
            elif step == "smart_truncate":
                # After a failed summary only a context over the hard limit is truncated.
                needed = (over_hard_limit if summary_failed else over_threshold)(policy, state)
                state = run_fallback(step, state, needed, policy, report)
            elif step == "hard_truncate":
                state = run_fallback(step, state, over_hard_limit(policy, state), policy, report)
        return state

    def _transaction(self, snapshot: ContextState) -> tuple[ContextState, bool]:
        """Prune (if in the chain) then summarize; commit both or roll both back.

        Returns the new state and whether the summary failed (which limits the fallbacks to
        contexts over the hard limit).
        """
        state = snapshot
        sources: list[int] | None = None
        try:
            if "selective" in self.policy.steps:
                state, sources = run_selective(state, self.policy, self.report)
            if "summary" in self.policy.steps:
                outcome = self.summary_step.run(state, snapshot, sources)
                self.summary = outcome  # committed with the transaction
                state = outcome.state
            return state, False
        except StepFailure as failure:
            if failure.reason == "nothing_to_compact" and state is snapshot:
                self.report.fail(failure.reason)
                return snapshot, False
            self.report.rollback(failure, snapshot.tokens, _TRANSACTION)
            return snapshot, failure.reason not in NOT_NEEDED

    def _alternating(self, original: ContextState, state: ContextState) -> ContextState:
        """`state` with the same-role neighbours the chain made merged (alternation.py).

        The summary message may absorb the tail's first (user) message: the outcome then
        holds the merged message, so the result still recognises it.
        """
        sources = sources_by_identity(state.messages, original.messages)
        groups = merge_groups(state.messages, sources)
        if len(groups) == len(state.messages):
            return state
        merged = [merge_run([state.messages[i] for i in group]) for group in groups]
        # Merging adds and removes no token (alternation.py): a merged message's count is
        # the sum of its parts' counts, not a count of its texts again.
        counts = [sum(state.counts[i] for i in group) for group in groups]
        if self.summary is not None:
            meta = self.summary.message.get(SUMMARY_KEY)
            message = next((m for m in merged if m.get(SUMMARY_KEY) is meta), None)
            if message is not None:
                self.summary = replace(self.summary, message=message)
        return ContextState(merged, counts)

    def _checked(self, original: ContextState, state: ContextState) -> ContextState:
        """The new context if it is a valid request with fewer tokens, else the original."""
        problems = validate_messages(state.messages)
        if problems:
            logger.error(
                "compaction produced an invalid request; rolled back: %s",
                "; ".join(str(p) for p in problems[:5]),
                extra=self.report.log_fields(),
            )
            return self._rolled_back(original, StepFailure("invalid_output", str(problems[0])))
        if state.tokens > original.tokens:
            return self._rolled_back(original, StepFailure("no_savings"))
        return state

    def _rolled_back(self, original: ContextState, failure: StepFailure) -> ContextState:
        self.summary = None  # rolling back is dropping the outcome
        self.report.rollback(failure, original.tokens)
        return original

    def _archive(self, original: ContextState, state: ContextState) -> None:
        """Write the originals the output no longer holds unchanged (docs/behaviour.md#archives)."""
        if self.archive is None:
            return
        kept = {id(message) for message in state.messages}
        replaced = [message for message in original.messages if id(message) not in kept]
        if not replaced:
            return
        try:
            self.archive_path = archive_messages(
                self.archive,
                replaced,
                session_id=self.options.session_id,
                moment=self.clock.now(),
                seq=self.options.archive_sequence,
            )
        except CompactionError as error:
            logger.error(  # the cause is in the message; no traceback wanted
                "archive write failed, compaction kept: %s",
                error,
                extra=self.report.log_fields(reason="archive_failed"),
            )
            self.report.emit(
                "archive_failed", reason="archive_failed", detail={"error": str(error)}
            )

    def _result(self, original: ContextState, state: ContextState, started: float) -> CompactResult:
        duration = self._duration_ms(started)
        summary = self.summary
        summarized = summary is not None and any(m is summary.message for m in state.messages)
        retained = len(state.messages) - (1 if summarized else 0)
        stats = CompactStats(
            original_token_count=original.tokens,
            compacted_token_count=state.tokens,
            compaction_ratio=state.tokens / original.tokens if original.tokens else None,
            compacted_message_count=len(original.messages) - retained,
            retained_message_count=retained,
            recall=summary.recall if summary is not None else None,
        )
        self.report.emit(
            "compaction_done", tokens_before=original.tokens, tokens_after=state.tokens
        )
        self.report.log_outcome("compacted", original.tokens, state.tokens, duration)
        return CompactResult(
            messages=state.messages,
            compacted=True,
            stats=stats,
            summary=summary.text if summary is not None else None,
            archive_path=self.archive_path,
            reason=self.report.failure,
            failure=self.report.cause,
            events=tuple(self.report.events),
            steps=tuple(self.report.steps),
            summarizer=self.summary_step.name if summary is not None else None,
            duration_ms=duration,
            partition=summary.partition if summary is not None else None,
        )

    def _unchanged(
        self, messages: Sequence[Message], original: ContextState, reason: str, started: float
    ) -> CompactResult:
        duration = self._duration_ms(started)
        if reason not in _NOT_STARTED:
            self.report.emit("compaction_done", tokens_before=original.tokens, reason=reason)
            outcome = "rolled_back" if self.report.rolled_back else "skipped"
            self.report.log_outcome(outcome, original.tokens, original.tokens, duration, reason)
        return CompactResult(
            messages=messages if isinstance(messages, list) else list(messages),
            compacted=False,
            stats=CompactStats(),
            reason=reason,
            failure=self.report.cause,
            events=tuple(self.report.events),
            steps=tuple(self.report.steps),
            duration_ms=duration,
        )

    def _duration_ms(self, started: float) -> int:
        return max(0, round((self.clock.monotonic() - started) * 1000))
