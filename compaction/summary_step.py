"""The summary step of a run: summarize the middle, assemble `[*head, summary, *tail]`
(docs/architecture.md, "Engine"; docs/behaviour.md#summary).

`SummaryStep.run` splits the context, asks the summarizer (with retries and backoff,
docs/behaviour.md#retries, or the wait the server asked for; in parts when the middle is larger than
one request may carry, `summary_parts`), appends the folded outlines of the files viewed in the
middle (docs/behaviour.md#file-outlines, within `fold_max_tokens`), checks that the middle's
identifiers survived (asking once more when recall is too low) and returns a frozen
`SummaryOutcome`. Nothing is committed here: the flow keeps the outcome when the run commits and
rolling back is dropping it. A failure raises `StepFailure` with the summary's failure reason.

The split is decided on the snapshot, the context as it was before pruning, so pruning
(which may shrink it far under the tail budget) never leaves the summary nothing to do. The
summarizer reads the middle's original messages, tool blocks that pruning drops included;
head and tail are taken from the pruned state.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any, Final

from .carrying import StateCarrier, paths_written_out
from .clock import Clock
from .errors import SummaryError
from .file_views import file_view_outlines
from .harness_text import without_harness
from .marked_words import words_remembered
from .messages import SUMMARY_KEY, Message, is_summary_message, make_summary_message
from .partition import split_points
from .policy import Policy
from .report import RunReport
from .results import Partition
from .retention import extract_identifiers, recall_around
from .run_state import ContextState, StepFailure
from .summarizers.base import Summarizer, SummaryRequest
from .summary_parts import PartedSummary, SummaryCalls
from .time_budget import TimeBudget
from .tokens import message_token_counts

__all__ = ["MAX_RETRY_WAIT_SECONDS", "SummaryOutcome", "SummaryStep", "summarizer_name"]

logger = logging.getLogger("compaction")

#: The longest wait between two attempts, also when the server asks for a longer one
#: (`Retry-After`): then the attempt is the last, as a wait cut short would fail again.
MAX_RETRY_WAIT_SECONDS: Final = 60.0


def summarizer_name(summarizer: Summarizer) -> str:
    """The name recorded with a summary: the summarizer's `name`, else its class name."""
    return str(getattr(summarizer, "name", type(summarizer).__name__))


@dataclass(frozen=True)
class SummaryOutcome:
    """A summary made and assembled, not yet committed.

    `state` is `[*head, message, *tail]`; `text` is the summarizer's text alone
    (`CompactResult.summary`), `message` also holds the `outlines`; `recall` is the share
    of the middle's identifiers the context still holds (None until measured).
    """

    state: ContextState
    text: str
    message: Message
    partition: Partition
    outlines: str = ""
    recall: float | None = None


@dataclass(frozen=True)
class SummaryStep:
    """The summary step of one run: its policy, summarizer, clock and report."""

    policy: Policy
    summarizer: Summarizer
    clock: Clock
    report: RunReport
    instructions: str | None = None
    force: bool = False
    #: The wall-clock budget of the summarizer phase (time_budget.py), restarted when the
    #: first attempt starts; the retention check's second request spends the same budget.
    budget: TimeBudget | None = None
    #: (span, level, covered) of the spans assembled, by identity (`_span`).
    _spans: dict[int, tuple[Sequence[Message], int, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    #: The summary requests of the run so far, within `Policy.max_summary_calls`.
    calls: SummaryCalls = field(init=False, repr=False, compare=False)
    #: The session state of the run's middle, its block and grounding (`carrying`).
    carrier: StateCarrier = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", SummaryCalls(self.policy.max_summary_calls))
        object.__setattr__(self, "carrier", StateCarrier(self.policy, self.summarizer))

    @property
    def name(self) -> str:
        return summarizer_name(self.summarizer)

    @property
    def parted(self) -> PartedSummary:
        """Summaries within the policy's summary_input_limit, in parts when needed."""
        return PartedSummary(
            self.policy, self.report, self.summarize_with_retries, self.name, self.calls
        )

    def run(
        self, state: ContextState, snapshot: ContextState, sources: list[int] | None
    ) -> SummaryOutcome:
        """Summarize the snapshot's middle; keep `state`'s (pruned) head and tail.

        `sources` gives the snapshot index of each message of `state` (None: they are the
        snapshot's own messages). Raises StepFailure (nothing to compact, the summary's
        failure reason, or no savings).
        """
        with words_remembered():  # the summarizer and the retention check share them
            return self._run(state, snapshot, sources)

    def _run(
        self, state: ContextState, snapshot: ContextState, sources: list[int] | None
    ) -> SummaryOutcome:
        parts, counts = self._split(state, snapshot, sources)
        if not parts.middle:
            self.report.step("summary", ran=False, why="nothing to compact", before=state.tokens)
            raise StepFailure("nothing_to_compact")
        self.report.emit(
            "summary_start",
            tokens_before=state.tokens,
            detail={"middle_messages": len(parts.middle), "summarizer": self.name},
        )
        block = self.carrier.carry(parts)
        request = SummaryRequest(
            messages=without_harness(parts.middle),
            max_tokens=self.carrier.narrative_tokens(),
            instructions=self.instructions,
            encoding=self.policy.encoding,
            state_block=block,
        )
        try:
            text, final = self.parted.run(request, counts)
            text = self.carrier.grounded(text, parts.middle)
        except SummaryError as error:
            self.report.step(
                "summary", ran=True, why=f"failed: {error.reason}", before=state.tokens
            )
            cause = replace(error.cause, provider=error.provider or self.name)
            raise StepFailure(error.reason, error.detail, cause) from error
        outlines = self.file_outlines(parts.middle, counts)
        final_counts = counts if final.messages is request.messages else None
        first = self.assemble(state, parts, text, outlines)
        outcome = self.retention_check(state, final, first, final_counts)
        new = outcome.state
        if new.tokens >= snapshot.tokens:
            self.report.step("summary", ran=True, why="no token savings", before=state.tokens)
            raise StepFailure("no_savings", f"{new.tokens} tokens after, {snapshot.tokens} before")
        self._report_done(state, outcome)
        return outcome

    def _report_done(self, state: ContextState, outcome: SummaryOutcome) -> None:
        after = outcome.state.tokens
        self.report.emit("summary_done", tokens_before=state.tokens, tokens_after=after)
        self.report.step(
            "summary",
            ran=True,
            changed=True,
            before=state.tokens,
            after=after,
            detail={
                "summarizer": self.name,
                "middle_messages": len(outcome.partition.middle),
                "recall": outcome.recall,
                "folded_files": outcome.outlines.count("<system-reminder>"),
            },
        )

    def _split(
        self, state: ContextState, snapshot: ContextState, sources: list[int] | None
    ) -> tuple[Partition, list[int]]:
        """The snapshot's middle between `state`'s head and tail (module doc), and the
        middle's token counts."""
        head_end, tail_start = split_points(
            snapshot.messages, self.policy, token_counts=snapshot.counts, force=self.force
        )
        middle = snapshot.messages[head_end:tail_start]
        counts = snapshot.counts[head_end:tail_start]
        if sources is None:
            head, tail = state.messages[:head_end], state.messages[tail_start:]
            return Partition(head, middle, tail), counts
        ordered = all(a < b for a, b in pairwise(sources))  # pruning keeps the order
        if ordered and len(sources) == len(state.messages):
            # the head is a prefix of `state`, the tail a suffix
            head_stop = bisect_left(sources, head_end)
            tail_from = bisect_left(sources, tail_start, head_stop)
            head, tail = state.messages[:head_stop], state.messages[tail_from:]
            return Partition(head, middle, tail), counts
        pairs = list(zip(state.messages, sources, strict=True))
        head = [m for m, i in pairs if i < head_end]
        tail = [m for m, i in pairs if i >= tail_start]
        return Partition(head, middle, tail), counts

    def summarize_with_retries(self, request: SummaryRequest) -> str:
        """The summary text; retries with exponential backoff (docs/behaviour.md#retries), or after
        the wait the server asked for, up to MAX_RETRY_WAIT_SECONDS."""
        attempts = self.policy.max_retries + 1
        if self.budget is not None:
            self.budget.restart()
        for attempt in range(1, attempts + 1):
            try:
                return self.summarize_once(request)
            except SummaryError as error:
                logger.warning(
                    "summary attempt %d of %d failed: %s",
                    attempt,
                    attempts,
                    error,
                    extra=self.report.log_fields(reason=error.reason, attempt=attempt),
                )
                delay = self._retry_delay(error, attempt)
                if attempt == attempts or not error.retryable or delay is None:
                    raise
                if self.budget is not None:
                    self.budget.check(delay)  # no retry starts past the budget: `time_budget`
                detail: dict[str, Any] = {"delay": delay}
                if error.retry_after is not None:
                    detail["retry_after"] = error.retry_after
                self.report.emit(
                    "summary_retry", reason=error.reason, attempt=attempt, detail=detail
                )
                self.clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _retry_delay(self, error: SummaryError, attempt: int) -> float | None:
        """The wait before the next attempt; None when the server asks for a longer one
        than MAX_RETRY_WAIT_SECONDS."""
        if error.retry_after is not None:
            if error.retry_after > MAX_RETRY_WAIT_SECONDS:
                logger.warning(
                    "the server asks to wait %.0f s, more than %.0f s: no retry",
                    error.retry_after,
                    MAX_RETRY_WAIT_SECONDS,
                    extra=self.report.log_fields(reason=error.reason, attempt=attempt),
                )
                return None
            return error.retry_after
        backoff: float = self.policy.retry_backoff_seconds * 2 ** (attempt - 1)
        return min(backoff, MAX_RETRY_WAIT_SECONDS)

    def summarize_once(self, request: SummaryRequest) -> str:
        """One summarizer call; any failure becomes a SummaryError with a reason."""
        if self.budget is not None:
            self.budget.check()
        try:
            text = self.summarizer.summarize(request)
        except SummaryError:
            raise
        except Exception as error:  # a summarizer bug must not break the caller's loop
            raise SummaryError.raised("summarizer_error", error) from error
        if not isinstance(text, str) or not text.strip():
            raise SummaryError("empty_summary", "the summarizer returned no text")
        return text.strip()

    def assemble(
        self, state: ContextState, parts: Partition, text: str, outlines: str
    ) -> SummaryOutcome:
        """`[*head, summary, *tail]` (docs/behaviour.md#summary); the summary ends with the
        outlines."""
        level, covered = self._span(parts.middle)
        text, extra = self.carrier.finish(text)
        message = make_summary_message(
            f"{text}\n\n{outlines}" if outlines else text,
            summarizer=self.name,
            message_count=len(parts.middle),
            covered_message_count=covered,
            level=level,
            created_at=self.clock.now().isoformat(timespec="seconds"),
            **extra,
        )
        new = _assembled(state, parts, message, self.policy.encoding)
        return SummaryOutcome(new, text, message, parts, outlines)

    def _span(self, middle: Sequence[Message]) -> tuple[int, int]:
        """(`_level`, `_covered`) of a span, its earlier summaries found in one pass, once
        per run (a run assembles its summary again when it asks again)."""
        known = self._spans.get(id(middle))
        if known is not None and known[0] is middle:
            return known[1], known[2]
        summaries = [m for m in middle if is_summary_message(m)]
        level, covered = _level(summaries), len(middle) - len(summaries) + _covered(summaries)
        self._spans[id(middle)] = (middle, level, covered)
        return level, covered

    def retention_check(
        self,
        state: ContextState,
        request: SummaryRequest,
        first: SummaryOutcome,
        counts: Sequence[int] | None = None,
    ) -> SummaryOutcome:
        """Measure recall of the middle's identifiers; ask once more when it is too low.

        `request` is the one that made the summary (the last of a parted run): asked again
        with the missing identifiers that fit under the input limit. `counts`: the token
        counts of its messages, when known.
        """
        parts = first.partition
        identifiers = extract_identifiers(parts.middle)
        # Both states are `[*head, message, *tail]` (`assemble`) and their messages end with
        # the same outlines: measured once, each summary's own text after.
        measure_recall = recall_around(identifiers, parts.head, parts.tail, first.outlines)
        recall, missing = measure_recall(paths_written_out(first.message))
        first = replace(first, recall=recall)
        self.report.emit(
            "retention_check",
            reason="low_recall" if recall < self.policy.min_recall else None,
            detail={"recall": recall, "identifiers": len(identifiers), "missing": len(missing)},
        )
        if recall >= self.policy.min_recall or not missing:
            return first
        listed = self.parted.identifiers_that_fit(request, missing, counts)
        if not listed or self.calls.left < 1:  # no second request past max_summary_calls
            return first
        retry = replace(request, required_identifiers=listed)
        try:
            self.calls.take()
            second_text = self.carrier.grounded(self.summarize_once(retry), parts.middle)
        except SummaryError as error:
            logger.warning("retention retry failed: %s", error, extra=self.report.log_fields())
            return first
        second = self.assemble(state, parts, second_text, first.outlines)
        second_recall, _ = measure_recall(paths_written_out(second.message))
        return replace(second, recall=second_recall) if second_recall > recall else first

    def file_outlines(self, middle: Sequence[Message], counts: Sequence[int]) -> str:
        """The folded outlines of the files viewed in `middle` (docs/behaviour.md#file-outlines), or
        "".

        `counts` are the middle's per-message token counts. See
        `file_views.file_view_outlines`. Folding is an extra: if it fails, the summary goes
        without it.
        """
        try:
            return file_view_outlines(middle, self.policy, counts)
        except Exception:
            logger.exception(
                "folding the middle's file views failed", extra=self.report.log_fields()
            )
            return ""


def _assembled(
    state: ContextState, parts: Partition, message: Message, encoding: str
) -> ContextState:
    """`state.then([*parts.head, message, *parts.tail])` for a new summary `message`: when
    the head is a prefix of `state` and the tail a suffix (the same objects), their counts
    are taken by position and only `message` is counted."""
    head, tail, messages = parts.head, parts.tail, state.messages
    new = [*head, message, *tail]
    if len(head) + len(tail) > len(messages):
        return state.then(new, encoding)
    rest = len(messages) - len(tail)
    if any(a is not b for a, b in zip(head, messages, strict=False)) or any(
        a is not b for a, b in zip(tail, messages[rest:], strict=True)
    ):
        return state.then(new, encoding)
    counts = [*state.counts[: len(head)], *message_token_counts([message], encoding)]
    return ContextState(new, [*counts, *state.counts[rest:]])


def _level(summaries: Sequence[Message]) -> int:
    """1 + the deepest of a span's earlier summaries (multi-level compaction,
    docs/behaviour.md#summaries-of-summaries)."""
    levels = [_metadata(m).get("level", 1) for m in summaries]
    return 1 + max((int(level) for level in levels), default=0)


def _covered(summaries: Sequence[Message]) -> int:
    """Original messages a span's earlier summaries stand for, counting through theirs."""
    total = 0
    for message in summaries:
        meta = _metadata(message)
        total += int(meta.get("covered_message_count", meta.get("message_count", 1)))
    return total


def _metadata(message: Message) -> dict[str, Any]:
    meta = message.get(SUMMARY_KEY)
    return meta if isinstance(meta, dict) else {}
