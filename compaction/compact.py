"""`compact_messages`: the one-call compaction (DESIGN.md, "The compaction flow").

The policy's chain runs in order: offload (when a target is given), selective pruning and
the summary (one transaction: they commit together or roll back together, seed 004 §4),
then the fallbacks smart truncation and hard truncation, which run only when they are
needed (seed 001 REQ-3.4, 002 §4.2). The input is never mutated; untouched messages keep
their identity. A summarizer failure never raises: the result says `compacted=False` and
names the reason.

The head / middle / tail partition is decided on the context as it was before pruning, so
pruning (which may shrink it far under the tail budget) never leaves the summary nothing
to do. The summary reads the middle's original messages, tool blocks that pruning drops
included, and the output is `[head, summary, pruned tail]`. The summary message also holds
the folded outlines of the files viewed in the middle (seed 002 §2.5), within
`fold_max_tokens`; `CompactResult.summary` is the summarizer's text alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from .archive import archive_messages
from .blobstore import BlobStore, LocalBlobStore
from .clock import Clock, SystemClock
from .errors import CompactionError, SummaryError
from .file_views import file_view_outlines
from .hard_truncate import hard_truncate
from .messages import SUMMARY_KEY, Message, is_summary_message, make_summary_message
from .offload import offload_tool_results
from .partition import split_points
from .policy import Policy
from .prune import prune_tool_blocks
from .results import (
    CompactionEvent,
    CompactResult,
    CompactStats,
    EventPhase,
    Partition,
    StepReport,
)
from .retention import extract_identifiers, measure_recall
from .smart_truncate import smart_truncate
from .summarizers.base import Summarizer, SummaryRequest
from .summarizers.extractive import ExtractiveSummarizer
from .tokens import message_token_counts
from .validation import ensure_valid, validate_messages

__all__ = ["EventHandler", "compact_messages"]

logger = logging.getLogger("compaction")

EventHandler = Callable[[CompactionEvent], None]
#: Reasons for returning the input unchanged that are not failures.
NOT_NEEDED: Final = frozenset({"empty", "disabled", "below_threshold", "nothing_to_compact"})
_TRANSACTION: Final = frozenset({"selective", "summary"})


def compact_messages(
    messages: Sequence[Message],
    policy: Policy | None = None,
    *,
    summarizer: Summarizer | None = None,
    archive_dir: str | os.PathLike[str] | None = None,
    archive_store: BlobStore | None = None,
    archive_sequence: int | None = None,
    session_id: str | None = None,
    instructions: str | None = None,
    on_event: EventHandler | None = None,
    clock: Clock | None = None,
    force: bool = False,
    trigger: str = "auto",
    offload_dir: str | os.PathLike[str] | None = None,
    offload_store: BlobStore | None = None,
    token_counts: Sequence[int] | None = None,
) -> CompactResult:
    """Compact `messages` when they reach the policy's threshold (always, with `force`).

    Raises InvalidMessagesError for invalid input. Otherwise never raises: every failure
    rolls back to the input and is named in `result.reason`. `archive_dir` (or
    `archive_store`) receives the originals the output no longer holds; `offload_dir` (or
    `offload_store`) enables the chain's offload step. `token_counts` (one per message,
    e.g. cached) saves the first count.
    """
    ensure_valid(messages)
    run = _Run(
        policy=policy or Policy(),
        summarizer=summarizer or ExtractiveSummarizer(),
        clock=clock or SystemClock(),
        session_id=session_id,
        trigger=trigger,
        instructions=instructions,
        on_event=on_event,
        force=force,
    )
    store = archive_store or (LocalBlobStore(archive_dir) if archive_dir is not None else None)
    offload = _OffloadTarget(offload_dir, offload_store)
    return run.execute(messages, token_counts, store, archive_sequence, offload)


@dataclass(frozen=True)
class _OffloadTarget:
    directory: str | os.PathLike[str] | None
    store: BlobStore | None

    @property
    def given(self) -> bool:
        return self.directory is not None or self.store is not None


@dataclass(frozen=True)
class _State:
    """A candidate context and its per-message token counts."""

    messages: list[Message]
    counts: list[int]

    @property
    def tokens(self) -> int:
        return sum(self.counts)

    def then(self, messages: list[Message], encoding: str) -> _State:
        """The state of `messages`, re-counting only the messages that are new objects."""
        known = {id(m): c for m, c in zip(self.messages, self.counts, strict=True)}
        fresh = iter(message_token_counts([m for m in messages if id(m) not in known], encoding))
        return _State(messages, [known[id(m)] if id(m) in known else next(fresh) for m in messages])


class _Failure(Exception):
    """A step failed: roll back, record `reason`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclass
class _Run:
    """One call of compact_messages: its settings and what happened so far."""

    policy: Policy
    summarizer: Summarizer
    clock: Clock
    session_id: str | None
    trigger: str
    instructions: str | None
    on_event: EventHandler | None
    force: bool
    events: list[CompactionEvent] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    failure: str | None = None
    rolled_back: bool = False
    summary: str | None = None
    summary_message: Message | None = None
    partition: Partition | None = None
    recall: float | None = None
    archive_path: str | None = None
    outlines: str = ""

    # --- the flow -------------------------------------------------------------------------

    def execute(
        self,
        messages: Sequence[Message],
        token_counts: Sequence[int] | None,
        store: BlobStore | None,
        archive_sequence: int | None,
        offload: _OffloadTarget,
    ) -> CompactResult:
        started = self.clock.monotonic()
        encoding = self.policy.encoding
        counts = list(token_counts) if token_counts is not None else None
        if counts is not None and len(counts) != len(messages):
            raise ValueError("token_counts must hold one count per message")
        original = _State(list(messages), counts or message_token_counts(messages, encoding))
        skip = self._skip_reason(original)
        if skip:
            logger.debug("compaction skipped: %s", skip, extra=self._log_fields(reason=skip))
            return self._unchanged(messages, original, skip, started)
        self.emit("compaction_start", tokens_before=original.tokens)
        logger.info(
            "compaction started: %d messages, %d tokens (threshold %d of %d)",
            len(original.messages),
            original.tokens,
            self.policy.threshold,
            self.policy.context_limit,
            extra=self._log_fields(
                tokens_before=original.tokens,
                message_count=len(original.messages),
                threshold=self.policy.threshold,
                context_limit=self.policy.context_limit,
                policy=self.policy.name,
            ),
        )
        state = self._chain(original, offload)
        if state is not original:
            state = self._checked(original, state)
        if state is original:
            return self._unchanged(
                messages, original, self.failure or "nothing_to_compact", started
            )
        self._archive(original, state, store, archive_sequence)
        return self._result(original, state, started)

    def _skip_reason(self, original: _State) -> str | None:
        if not original.messages:
            return "empty"
        if self.force:
            return None
        if not self.policy.enabled:
            return "disabled"
        if self.policy.scaled(original.tokens) < self.policy.threshold:
            return "below_threshold"
        return None

    def _chain(self, state: _State, offload: _OffloadTarget) -> _State:
        steps = self.policy.steps
        summary_failed = False
        for step in steps:
            if step == "offload":
                state = self._offload(state, offload)
                if not self.force and not self._over_threshold(state):
                    self._skip_rest(steps, "offload brought the context under the threshold")
                    return state
            elif step == "summary" or (step == "selective" and "summary" not in steps):
                state, summary_failed = self._transaction(state)
            elif step == "smart_truncate":
                needed = self._over_hard_limit(state) if summary_failed else None
                state = self._fallback(step, state, needed)
            elif step == "hard_truncate":
                state = self._fallback(step, state, self._over_hard_limit(state))
        return state

    def _skip_rest(self, steps: Sequence[str], why: str) -> None:
        done = {report.step for report in self.steps}
        for step in steps:
            if step not in done:
                self._report(step, ran=False, why=why)

    # --- selective pruning + summary: one transaction ------------------------------------

    def _transaction(self, snapshot: _State) -> tuple[_State, bool]:
        """Prune (if in the chain) then summarize; commit both or roll both back.

        Returns the new state and whether the summary failed (which limits the fallbacks to
        contexts over the hard limit).
        """
        state = snapshot
        sources: list[int] | None = None
        pruned = False
        try:
            if "selective" in self.policy.steps:
                state, sources = self._selective(state)
                pruned = state is not snapshot
            if "summary" in self.policy.steps:
                state = self._summary(state, snapshot, sources)
            elif not pruned:
                return snapshot, False
            return state, False
        except _Failure as failure:
            if failure.reason == "nothing_to_compact" and not pruned:
                self.failure = self.failure or failure.reason
                return snapshot, False
            self._rollback(failure, snapshot, _TRANSACTION)
            return snapshot, failure.reason not in NOT_NEEDED

    def _rollback(
        self, failure: _Failure, snapshot: _State, steps: frozenset[str] | None = None
    ) -> None:
        """Record a rollback to `snapshot`; the reports of `steps` (default: all) that had
        changed something are marked rolled back."""
        self.failure = failure.reason
        self.rolled_back = True
        self.steps = [
            replace(r, changed=False, detail={**r.detail, "rolled_back": True})
            if r.changed and (steps is None or r.step in steps)
            else r
            for r in self.steps
        ]
        self.summary = self.summary_message = self.partition = None
        self.outlines = ""
        self.recall = None
        self.emit(
            "rollback",
            tokens_before=snapshot.tokens,
            tokens_after=snapshot.tokens,
            reason=failure.reason,
            detail={"detail": failure.detail} if failure.detail else {},
        )
        logger.warning(
            "compaction rolled back: %s %s",
            failure.reason,
            failure.detail,
            extra=self._log_fields(reason=failure.reason),
        )

    def _selective(self, state: _State) -> tuple[_State, list[int] | None]:
        """The pruned state and, when it changed, the source index of each of its messages."""
        self.emit("selective_start", tokens_before=state.tokens)
        try:
            pruned = prune_tool_blocks(state.messages, self.policy)
        except Exception as error:
            logger.exception("selective pruning failed", extra=self._log_fields())
            self._report("selective", ran=True, why=f"failed: {error!r}", before=state.tokens)
            raise _Failure("selective_error", repr(error)) from error
        new = state.then(pruned.messages, self.policy.encoding)
        counts = {
            "tool_blocks_kept": pruned.tool_blocks_kept,
            "tool_blocks_dropped": pruned.tool_blocks_dropped,
            "tool_calls_truncated": pruned.tool_calls_truncated,
            "tool_results_truncated": pruned.tool_results_truncated,
        }
        self.emit("selective_done", tokens_before=state.tokens, tokens_after=new.tokens, **counts)
        changed = _differs(new.messages, state.messages)
        self._report(
            "selective",
            ran=True,
            changed=changed,
            before=state.tokens,
            after=new.tokens,
            detail=counts,
        )
        return (new, pruned.source_indexes) if changed else (state, None)

    def _summary(self, state: _State, snapshot: _State, sources: list[int] | None) -> _State:
        """Summarize the snapshot's middle; keep `state`'s (pruned) head and tail.

        `sources` gives the snapshot index of each message of `state` (None: they are the
        snapshot's own messages).
        """
        head_end, tail_start = split_points(
            snapshot.messages, self.policy, token_counts=snapshot.counts, force=self.force
        )
        middle = snapshot.messages[head_end:tail_start]
        if sources is None:
            head = state.messages[:head_end]
            tail = state.messages[tail_start:]
        else:
            head = [m for m, i in zip(state.messages, sources, strict=True) if i < head_end]
            tail = [m for m, i in zip(state.messages, sources, strict=True) if i >= tail_start]
        if not middle:
            self._report("summary", ran=False, why="nothing to compact", before=state.tokens)
            raise _Failure("nothing_to_compact")
        self.emit(
            "summary_start",
            tokens_before=state.tokens,
            detail={"middle_messages": len(middle), "summarizer": self._summarizer_name},
        )
        request = SummaryRequest(
            messages=middle,
            max_tokens=self.policy.summary_max_tokens,
            instructions=self.instructions,
            encoding=self.policy.encoding,
        )
        try:
            text = self._summarize_with_retries(request)
        except SummaryError as error:
            self._report("summary", ran=True, why=f"failed: {error.reason}", before=state.tokens)
            raise _Failure(error.reason, error.detail) from error
        self.outlines = self._file_outlines(middle, snapshot.counts[head_end:tail_start])
        new = self._assemble(state, head, middle, tail, text)
        new, text = self._retention_check(state, request, head, middle, tail, new, text)
        if new.tokens >= snapshot.tokens:
            self._report("summary", ran=True, why="no token savings", before=state.tokens)
            raise _Failure("no_savings", f"{new.tokens} tokens after, {snapshot.tokens} before")
        self.summary = text
        self.partition = Partition(head=list(head), middle=list(middle), tail=list(tail))
        self.emit("summary_done", tokens_before=state.tokens, tokens_after=new.tokens)
        self._report(
            "summary",
            ran=True,
            changed=True,
            before=state.tokens,
            after=new.tokens,
            detail={
                "summarizer": self._summarizer_name,
                "middle_messages": len(middle),
                "recall": self.recall,
                "folded_files": self.outlines.count("<system-reminder>"),
            },
        )
        return new

    def _summarize_with_retries(self, request: SummaryRequest) -> str:
        """The summary text; retries with exponential backoff (seed 000 F-007)."""
        attempts = self.policy.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._summarize_once(request)
            except SummaryError as error:
                logger.warning(
                    "summary attempt %d of %d failed: %s",
                    attempt,
                    attempts,
                    error,
                    extra=self._log_fields(reason=error.reason, attempt=attempt),
                )
                if attempt == attempts or not error.retryable:
                    raise
                delay = self.policy.retry_backoff_seconds * 2 ** (attempt - 1)
                self.emit(
                    "summary_retry", reason=error.reason, attempt=attempt, detail={"delay": delay}
                )
                self.clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _summarize_once(self, request: SummaryRequest) -> str:
        try:
            text = self.summarizer.summarize(request)
        except SummaryError:
            raise
        except Exception as error:  # a summarizer bug must not break the caller's loop
            raise SummaryError("summarizer_error", repr(error)) from error
        if not isinstance(text, str) or not text.strip():
            raise SummaryError("empty_summary", "the summarizer returned no text")
        return text.strip()

    def _assemble(
        self,
        state: _State,
        head: list[Message],
        middle: list[Message],
        tail: list[Message],
        text: str,
    ) -> _State:
        """`[*head, summary, *tail]` (seed 000 F-005); the summary ends with the outlines."""
        message = make_summary_message(
            f"{text}\n\n{self.outlines}" if self.outlines else text,
            summarizer=self._summarizer_name,
            message_count=len(middle),
            covered_message_count=_covered(middle),
            level=_level(middle),
            created_at=self.clock.now().isoformat(timespec="seconds"),
        )
        self.summary_message = message
        return state.then([*head, message, *tail], self.policy.encoding)

    def _retention_check(
        self,
        state: _State,
        request: SummaryRequest,
        head: list[Message],
        middle: list[Message],
        tail: list[Message],
        new: _State,
        text: str,
    ) -> tuple[_State, str]:
        """Measure recall of the middle's identifiers; ask once more when it is too low."""
        identifiers = extract_identifiers(middle)
        recall, missing = measure_recall(identifiers, new.messages)
        self.recall = recall
        self.emit(
            "retention_check",
            reason="low_recall" if recall < self.policy.min_recall else None,
            detail={"recall": recall, "identifiers": len(identifiers), "missing": len(missing)},
        )
        if recall >= self.policy.min_recall or not missing:
            return new, text
        retry = replace(request, required_identifiers=tuple(missing))
        first_message = self.summary_message
        try:
            second_text = self._summarize_once(retry)
        except SummaryError as error:
            logger.warning("retention retry failed: %s", error, extra=self._log_fields())
            return new, text
        second = self._assemble(state, head, middle, tail, second_text)
        second_recall, _ = measure_recall(identifiers, second.messages)
        if second_recall > recall:
            self.recall = second_recall
            return second, second_text
        self.summary_message = first_message
        return new, text

    def _file_outlines(self, middle: Sequence[Message], counts: Sequence[int]) -> str:
        """The folded outlines of the files viewed in `middle` (seed 002 §2.5), or "".

        See `file_views.file_view_outlines`. Folding is an extra: if it fails, the summary
        goes without it.
        """
        try:
            return file_view_outlines(middle, self.policy, counts)
        except Exception:
            logger.exception("folding the middle's file views failed", extra=self._log_fields())
            return ""

    # --- offload and fallbacks -----------------------------------------------------------

    def _offload(self, state: _State, target: _OffloadTarget) -> _State:
        if not target.given:
            self._report("offload", ran=False, why="no offload directory or store given")
            return state

        try:
            result = offload_tool_results(
                state.messages,
                target.directory,
                min_chars=self.policy.offload_min_chars,
                store=target.store,
            )
        except Exception as error:
            logger.exception("offload failed", extra=self._log_fields())
            self._report("offload", ran=True, why=f"failed: {error!r}", before=state.tokens)
            self.failure = self.failure or "offload_error"
            return state
        new = state.then(result.messages, self.policy.encoding)
        counts = {"offloaded_count": result.offloaded_count, "freed_chars": result.freed_chars}
        self.emit(
            "offload_done", tokens_before=state.tokens, tokens_after=new.tokens, detail=counts
        )
        self._report(
            "offload",
            ran=True,
            changed=result.offloaded_count > 0,
            before=state.tokens,
            after=new.tokens,
            detail={**counts, "files": list(result.files)},  # the event stays file-free
        )
        return new if result.offloaded_count else state

    def _fallback(self, step: str, state: _State, needed: bool | None) -> _State:
        """Run smart_truncate / hard_truncate when needed.

        `needed` None means: when the context is still over the trigger threshold.
        """
        if needed is None:
            needed = self._over_threshold(state)
        if not needed:
            why = "under the hard limit" if step == "hard_truncate" else "not needed"
            self._report(step, ran=False, why=why, before=state.tokens)
            return state
        try:
            if step == "smart_truncate":
                result = smart_truncate(state.messages, self.policy)
            else:
                result = hard_truncate(state.messages, self.policy)
        except Exception as error:
            logger.exception("%s failed", step, extra=self._log_fields())
            self._report(step, ran=True, why=f"failed: {error!r}", before=state.tokens)
            self.failure = self.failure or f"{step}_error"
            return state
        new = state.then(result.messages, self.policy.encoding) if result.truncated else state
        phase: EventPhase = (
            "smart_truncate_done" if step == "smart_truncate" else ("hard_truncate_done")
        )
        removed = {"removed_message_count": result.removed_message_count}
        self.emit(phase, tokens_before=state.tokens, tokens_after=new.tokens, detail=removed)
        if step == "hard_truncate" and result.truncated:
            logger.warning(
                "history truncated to the hard limit: %d -> %d messages",
                len(state.messages),
                len(new.messages),
                extra=self._log_fields(tokens_before=state.tokens, tokens_after=new.tokens),
            )
        self._report(
            step,
            ran=True,
            changed=result.truncated,
            before=state.tokens,
            after=new.tokens,
            detail={**removed, **result.detail},
        )
        return new

    def _over_threshold(self, state: _State) -> bool:
        return self.policy.scaled(state.tokens) >= self.policy.threshold

    def _over_hard_limit(self, state: _State) -> bool:
        return self.policy.scaled(state.tokens) > self.policy.effective_hard_limit

    # --- commit --------------------------------------------------------------------------

    def _checked(self, original: _State, state: _State) -> _State:
        """The new context if it is a valid request with fewer tokens, else the original."""
        problems = validate_messages(state.messages)
        if problems:
            logger.error(
                "compaction produced an invalid request; rolled back: %s",
                "; ".join(str(p) for p in problems[:5]),
                extra=self._log_fields(),
            )
            self._rollback(_Failure("invalid_output", str(problems[0])), original)
            return original
        if state.tokens > original.tokens:
            self._rollback(_Failure("no_savings"), original)
            return original
        return state

    def _archive(
        self,
        original: _State,
        state: _State,
        store: BlobStore | None,
        sequence: int | None,
    ) -> None:
        """Write the originals the output no longer holds unchanged (seed 000 F-006)."""
        if store is None:
            return
        kept = {id(message) for message in state.messages}
        replaced = [message for message in original.messages if id(message) not in kept]
        if not replaced:
            return
        try:
            self.archive_path = archive_messages(
                store, replaced, session_id=self.session_id, moment=self.clock.now(), seq=sequence
            )
        except CompactionError as error:
            logger.error(  # the cause is in the message; no traceback wanted
                "archive write failed, compaction kept: %s",
                error,
                extra=self._log_fields(reason="archive_failed"),
            )
            self.emit("archive_failed", reason="archive_failed", detail={"error": str(error)})

    def _result(self, original: _State, state: _State, started: float) -> CompactResult:
        duration = self._duration_ms(started)
        summarized = any(m is self.summary_message for m in state.messages)
        retained = len(state.messages) - (1 if summarized else 0)
        stats = CompactStats(
            original_token_count=original.tokens,
            compacted_token_count=state.tokens,
            compaction_ratio=state.tokens / original.tokens if original.tokens else None,
            compacted_message_count=len(original.messages) - retained,
            retained_message_count=retained,
            recall=self.recall,
        )
        self.emit("compaction_done", tokens_before=original.tokens, tokens_after=state.tokens)
        self._log_outcome("compacted", original.tokens, state.tokens, duration)
        return CompactResult(
            messages=state.messages,
            compacted=True,
            stats=stats,
            summary=self.summary,
            archive_path=self.archive_path,
            reason=self.failure,
            events=tuple(self.events),
            steps=tuple(self.steps),
            summarizer=self._summarizer_name if self.summary is not None else None,
            duration_ms=duration,
            partition=self.partition,
        )

    def _unchanged(
        self, messages: Sequence[Message], original: _State, reason: str, started: float
    ) -> CompactResult:
        duration = self._duration_ms(started)
        if reason not in {"empty", "disabled", "below_threshold"}:
            self.emit("compaction_done", tokens_before=original.tokens, reason=reason)
            outcome = "rolled_back" if self.rolled_back else "skipped"
            self._log_outcome(outcome, original.tokens, original.tokens, duration, reason)
        return CompactResult(
            messages=messages if isinstance(messages, list) else list(messages),
            compacted=False,
            stats=CompactStats(),
            reason=reason,
            events=tuple(self.events),
            steps=tuple(self.steps),
            duration_ms=duration,
        )

    # --- reporting -----------------------------------------------------------------------

    @property
    def _summarizer_name(self) -> str:
        return str(getattr(self.summarizer, "name", type(self.summarizer).__name__))

    def emit(self, phase: EventPhase, **fields: Any) -> None:
        event = CompactionEvent(phase=phase, **fields)
        self.events.append(event)
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # an observer's bug must not change the compaction
            logger.exception("on_event handler failed for %s", phase, extra=self._log_fields())

    def _report(
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
        info = dict(detail or {})
        if why:
            info["why"] = why
        tokens_after = before if after is None else after
        report = StepReport(step, ran, changed, before, tokens_after, info)
        self.steps = [r for r in self.steps if r.step != step] + [report]

    def _log_fields(self, **fields: Any) -> dict[str, Any]:
        return {"session_id": self.session_id, "trigger": self.trigger, **fields}

    def _log_outcome(
        self, outcome: str, before: int, after: int, duration: int, reason: str | None = None
    ) -> None:
        logger.log(
            # A skip (below the threshold, nothing to compact, cooldown) is routine.
            logging.INFO if outcome in {"compacted", "skipped"} else logging.WARNING,
            "compaction %s: %d -> %d tokens in %d ms%s",
            outcome,
            before,
            after,
            duration,
            f" ({reason})" if reason else "",
            extra=self._log_fields(
                tokens_before=before,
                tokens_after=after,
                duration_ms=duration,
                outcome=outcome,
                reason=reason or self.failure,
                steps=[r.step for r in self.steps if r.ran],
            ),
        )

    def _duration_ms(self, started: float) -> int:
        return max(0, round((self.clock.monotonic() - started) * 1000))


def _level(middle: Sequence[Message]) -> int:
    """1 + the deepest earlier summary inside the span (multi-level compaction, UC-002)."""
    levels = [_metadata(m).get("level", 1) for m in middle if is_summary_message(m)]
    return 1 + max((int(level) for level in levels), default=0)


def _covered(middle: Sequence[Message]) -> int:
    """Original messages the span stands for, counting through earlier summaries."""
    total = 0
    for message in middle:
        if is_summary_message(message):
            meta = _metadata(message)
            total += int(meta.get("covered_message_count", meta.get("message_count", 1)))
        else:
            total += 1
    return total


def _metadata(message: Message) -> dict[str, Any]:
    meta = message.get(SUMMARY_KEY)
    return meta if isinstance(meta, dict) else {}


def _differs(new: Sequence[Message], old: Sequence[Message]) -> bool:
    """True unless `new` holds exactly the same message objects as `old`, in order."""
    return len(new) != len(old) or any(a is not b for a, b in zip(new, old, strict=True))
