"""Compacting a stored session: the engine runs outside any transaction, the commit inside one.

`compact_session` snapshots the runtime context, calls `compaction.compact_messages` with
the session's profile (read fresh), then commits through `writeback.commit_context`, which
checks that the entries it worked on are unchanged: appends made meanwhile are kept after
the summary, and of two concurrent compactions exactly one wins (the other: Conflict, 409).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from django.db import DatabaseError

from compaction import (
    NOT_NEEDED,
    CallerSummary,
    CompactionError,
    CompactionEvent,
    CompactOptions,
    CompactResult,
    EventHandler,
    Policy,
    Summarizer,
    compact_messages,
    is_summary_message,
    message_token_counts,
)
from sessions_app.models import Compaction, CompactionProfile, Session
from sessions_app.nul import strip_nul
from sessions_app.services.compacting.archives import ArchiveUnavailable
from sessions_app.services.compacting.failed_attempts import record_failure
from sessions_app.services.compacting.recall_line import predicted_recall_tokens
from sessions_app.services.compacting.released import release_connections
from sessions_app.services.compacting.writeback import (
    CommitMeta,
    ContextSnapshot,
    commit_context,
    take_snapshot,
)
from sessions_app.services.errors import InvalidInput, engine_error
from sessions_app.services.sessions.entries import ENTRY_KEY
from sessions_app.services.sessions.lifecycle import reload_totals
from sessions_app.services.sessions.policies import (
    policy_for,
    profile_for,
    summarizer_for,
    summary_model,
)
from sessions_app.storage import BLOB_PREFIX, DjangoStorageBlobStore

__all__ = [
    "CompactionOutcome",
    "CompactionPreview",
    "EngineRun",
    "compact_session",
    "record_not_compacted",
    "run_engine",
]

logger = logging.getLogger("sessions_app")

#: Summarizer name recorded for a caller-written summary (the agent's compress_context).
CALLER_SUMMARIZER = "caller"


@dataclass(frozen=True, slots=True)
class CompactionPreview:
    """A dry run: what a compaction would do now; nothing is stored.

    `partition` gives `{messages, tokens}` of the head, middle (summarized) and tail;
    `middle_entry_ids` are the context entries the summary would replace.
    """

    partition: dict[str, dict[str, int]] | None
    tokens_before: int
    predicted_tokens_after: int
    messages_before: int
    predicted_messages_after: int
    summary: str | None
    summarizer: str | None
    middle_entry_ids: tuple[int, ...]
    steps: tuple[dict[str, Any], ...]
    compacted: bool
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """The preview as the API answers it."""
        return {**asdict(self), "middle_entry_ids": list(self.middle_entry_ids)}


@dataclass(frozen=True)
class CompactionOutcome:
    """What `compact_session` did: the Compaction row (None when nothing was stored)."""

    compaction: Compaction | None
    result: CompactResult | None
    dry_run: bool = False
    reason: str | None = None
    preview: CompactionPreview | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def compacted(self) -> bool:
        """True when the context was (or, in a dry run, would be) changed."""
        if self.dry_run:
            return bool(self.result and self.result.compacted)
        return self.compaction is not None and self.compaction.status == "succeeded"

    @property
    def failed(self) -> bool:
        """True when an attempt failed (the context is unchanged)."""
        return self.compaction is not None and self.compaction.status == "failed"


def compact_session(  # noqa: PLR0913 (keyword-only options of one run)
    session: Session,
    *,
    trigger: str = Compaction.Trigger.MANUAL,
    profile: CompactionProfile | str | None = None,
    instructions: str | None = None,
    summary: str | None = None,
    dry_run: bool = False,
    summarizer: Summarizer | None = None,
    on_event: EventHandler | None = None,
    force: bool | None = None,
) -> CompactionOutcome:
    """Compact the session's runtime context now.

    `summary`: a caller-written summary replaces the middle (no summarizer call).
    `dry_run`: run the engine and return the preview; store nothing. `force` (default: not
    for `auto`) compacts even under the threshold. Raises Conflict when another change to
    the same entries committed first, InvalidInput for an empty summary or a bad profile,
    Unavailable when the offload storage fails; a summary, archive or database failure is
    recorded as a failed Compaction row and leaves the context exactly as it was.
    """
    try:
        return _compact(
            session,
            trigger=trigger,
            profile=profile,
            instructions=instructions,
            summary=summary,
            dry_run=dry_run,
            summarizer=summarizer,
            on_event=on_event,
            force=force,
        )
    except CompactionError as error:
        raise engine_error(error) from error


def _compact(  # noqa: PLR0913 (compact_session's options)
    session: Session,
    *,
    trigger: str,
    profile: CompactionProfile | str | None,
    instructions: str | None,
    summary: str | None,
    dry_run: bool,
    summarizer: Summarizer | None,
    on_event: EventHandler | None,
    force: bool | None,
) -> CompactionOutcome:
    if force is None:
        force = trigger != Compaction.Trigger.AUTO
    run = run_engine(
        session,
        trigger=trigger,
        profile=profile,
        instructions=instructions,
        summary=summary,
        summarizer=summarizer,
        on_event=on_event,
        force=force,
    )
    snapshot, result, meta, events, policy = (
        run.snapshot,
        run.result,
        run.meta,
        run.events,
        run.policy,
    )
    if dry_run:
        preview = _preview(snapshot, result, policy)
        # The summaries the run wrote (those of earlier compactions carry their entry id).
        written = result.messages if result.compacted else []
        summaries = [m for m in written if is_summary_message(m) and not m.get(ENTRY_KEY)]
        grown = predicted_recall_tokens(
            session, summaries, preview.middle_entry_ids, policy.encoding
        )
        preview = replace(preview, predicted_tokens_after=preview.predicted_tokens_after + grown)
        return CompactionOutcome(
            None, result, dry_run=True, reason=result.reason, preview=preview, events=events
        )
    if not result.compacted:
        return _not_compacted(session, snapshot, result, meta, events)
    outcome = _commit(session, snapshot, result, meta, events)
    reload_totals(session)
    return outcome


@dataclass(frozen=True)
class EngineRun:
    """One engine run on a snapshot of the session's context; nothing stored yet."""

    snapshot: ContextSnapshot
    result: CompactResult
    meta: CommitMeta
    policy: Policy
    events: list[dict[str, Any]]


def run_engine(
    session: Session,
    *,
    trigger: str,
    profile: CompactionProfile | str | None,
    force: bool,
    instructions: str | None = None,
    summary: str | None = None,
    summarizer: Summarizer | None = None,
    on_event: EventHandler | None = None,
) -> EngineRun:
    """Snapshot the context and run the engine on it, no connection held while the
    summarizer answers (services/compacting/released.py). Raises the engine's errors."""
    chosen, policy, summarizer = _setup(session, profile, summary, summarizer)
    events: list[dict[str, Any]] = []

    def observe(event: CompactionEvent) -> None:
        events.append(event.to_dict())
        if on_event is not None:
            on_event(event)

    snapshot = take_snapshot(session)
    release_connections()
    started = time.monotonic()
    options = CompactOptions(
        summarizer=summarizer,
        session_id=str(session.pk),
        instructions=instructions,
        on_event=observe,
        force=force,
        trigger=trigger,
        offload_store=DjangoStorageBlobStore(f"{BLOB_PREFIX}/{session.pk}"),
        token_counts=snapshot.token_counts,  # cached counts: the context is not re-encoded
    )
    result = compact_messages(snapshot.messages, policy, options=options)
    meta = _meta(trigger, chosen, policy, summarizer, instructions, result, events, started)
    return EngineRun(snapshot, result, meta, policy, events)


def record_not_compacted(session: Session, run: EngineRun) -> CompactionOutcome:
    """The outcome of a run that changed nothing: a failure is recorded as a failed row."""
    return _not_compacted(session, run.snapshot, run.result, run.meta, run.events)


def _setup(
    session: Session,
    profile: CompactionProfile | str | None,
    summary: str | None,
    summarizer: Summarizer | None,
) -> tuple[CompactionProfile, Policy, Summarizer]:
    """The profile, policy and summarizer of a run (a caller-written summary: its own)."""
    chosen = profile if isinstance(profile, CompactionProfile) else profile_for(session, profile)
    policy = policy_for(session, chosen)
    if summary is not None:
        if not summary.strip():
            raise InvalidInput.field("summary", "must not be empty")
        policy = policy.replace(steps=("summary",))
        summarizer = CallerSummary(summary.strip(), name=CALLER_SUMMARIZER)
    return chosen, policy, summarizer or summarizer_for(chosen, session)


def _commit(
    session: Session,
    snapshot: ContextSnapshot,
    result: CompactResult,
    meta: CommitMeta,
    events: list[dict[str, Any]],
) -> CompactionOutcome:
    try:
        compaction = commit_context(snapshot, result.messages, meta)
    except ArchiveUnavailable as error:
        return _failed(session, snapshot, result, meta, events, "archive_error", error)
    except DatabaseError as error:
        return _failed(session, snapshot, result, meta, events, "database_error", error)
    logger.info(
        "session compacted: #%d %d -> %d tokens",
        compaction.number,
        compaction.tokens_before,
        compaction.tokens_after,
        extra=_log_fields(session, meta, compaction=compaction.number, outcome="compacted"),
    )
    return CompactionOutcome(compaction, result, reason=result.reason, events=events)


def _not_compacted(
    session: Session,
    snapshot: ContextSnapshot,
    result: CompactResult,
    meta: CommitMeta,
    events: list[dict[str, Any]],
) -> CompactionOutcome:
    reason = result.reason or "nothing_to_compact"
    if reason in NOT_NEEDED:
        return CompactionOutcome(None, result, reason=reason, events=events)
    failed = record_failure(
        session,
        meta,
        reason,
        tokens_before=snapshot.tokens,
        messages=len(snapshot.entries),
        cause=result.failure,
    )
    logger.warning(
        "session compaction failed: %s",
        reason,
        extra=_log_fields(session, meta, outcome="failed", reason=reason),
    )
    return CompactionOutcome(failed, result, reason=reason, events=events)


def _failed(
    session: Session,
    snapshot: ContextSnapshot,
    result: CompactResult,
    meta: CommitMeta,
    events: list[dict[str, Any]],
    reason: str,
    error: Exception,
) -> CompactionOutcome:
    logger.error(
        "session compaction could not be stored: %s",
        error,
        extra=_log_fields(session, meta, outcome="failed", reason=reason),
    )
    events.append({"phase": "rollback", "reason": reason, "detail": {"error": str(error)}})
    meta.details["events"] = events
    failed = record_failure(
        session,
        meta,
        reason,
        tokens_before=snapshot.tokens,
        messages=len(snapshot.entries),
        error=error,
    )
    return CompactionOutcome(failed, result, reason=reason, events=events)


def _meta(
    trigger: str,
    profile: CompactionProfile,
    policy: Policy,
    summarizer: Summarizer,
    instructions: str | None,
    result: CompactResult,
    events: list[dict[str, Any]],
    started: float,
) -> CommitMeta:
    ran = [report.step for report in result.steps if report.ran and report.changed]
    summarized = result.summary is not None
    truncated = any(step in {"smart_truncate", "hard_truncate"} for step in ran)
    if truncated and not summarized and trigger == Compaction.Trigger.AUTO:
        trigger = Compaction.Trigger.HARD_LIMIT
    name = str(getattr(summarizer, "name", type(summarizer).__name__))
    return CommitMeta(
        trigger=trigger,
        strategy=f"{profile.name}: {'+'.join(ran) or 'none'}",
        summarizer=name if summarized else "",
        model=str(getattr(summarizer, "model", "") or "") if summarized else "",
        # Recorded copies: PostgreSQL cannot store a NUL, and a record must never fail for one.
        instructions=strip_nul(instructions or ""),
        summary=strip_nul(result.summary or ""),
        encoding=policy.encoding,
        stats=result.stats.to_dict(),
        duration_ms=result.duration_ms or round((time.monotonic() - started) * 1000),
        details={
            "profile": profile.name,
            "policy": policy.to_dict(),
            # The model that wrote it (the `upstream` provider's: the conversation's), else
            # the one configured.
            "summary_model": (getattr(summarizer, "model", "") or summary_model(profile))
            if name != CALLER_SUMMARIZER
            else "",
            "steps": [_step_dict(report) for report in result.steps],
            "events": events,
            "reason": result.reason,
        },
    )


def _step_dict(report: Any) -> dict[str, Any]:
    return {
        "step": report.step,
        "ran": report.ran,
        "changed": report.changed,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "detail": dict(report.detail),
    }


def _preview(snapshot: ContextSnapshot, result: CompactResult, policy: Policy) -> CompactionPreview:
    """Dry-run data: partition counts, predicted tokens and the summary that would be used."""
    parts: dict[str, Any] = {}
    if result.partition is not None:
        # The engine keeps untouched messages as they are: their cached counts hold, and
        # only the messages a step replaced (pruned, offloaded) are counted.
        known = {id(m): c for m, c in zip(snapshot.messages, snapshot.token_counts, strict=True)}
        for name in ("head", "middle", "tail"):
            messages: Sequence[Mapping[str, Any]] = getattr(result.partition, name)
            parts[name] = {"messages": len(messages), "tokens": _tokens(messages, known, policy)}
    middle = result.partition.middle if result.partition is not None else []
    return CompactionPreview(
        partition=parts or None,
        tokens_before=snapshot.tokens,
        predicted_tokens_after=(
            result.stats.compacted_token_count + snapshot.pending_tokens
            if result.compacted
            else snapshot.tokens
        ),
        messages_before=len(snapshot.entries) + len(snapshot.pending),
        predicted_messages_after=len(result.messages) + len(snapshot.pending),
        summary=result.summary,
        summarizer=result.summarizer,
        middle_entry_ids=tuple(m[ENTRY_KEY] for m in middle if m.get(ENTRY_KEY)),
        steps=tuple(_step_dict(report) for report in result.steps),
        compacted=result.compacted,
        reason=result.reason,
    )


def _tokens(messages: Sequence[Mapping[str, Any]], known: Mapping[int, int], policy: Policy) -> int:
    """The tokens of `messages`: cached counts from `known` (by identity), the rest counted."""
    missing = [m for m in messages if id(m) not in known]
    counted = sum(message_token_counts(missing, policy.encoding)) if missing else 0
    return counted + sum(known.get(id(m), 0) for m in messages)


def _log_fields(session: Session, meta: CommitMeta, **fields: Any) -> dict[str, Any]:
    return {"session_id": str(session.pk), "trigger": meta.trigger, **fields}
