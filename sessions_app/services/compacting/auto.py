"""Automatic compaction: the pre-call `prepare_context` and the post-call usage check.

Before an LLM call, past the profile's soft threshold (`prepare_at`) a compaction is
prepared in the background, and at its threshold the prepared one is applied; none ready,
the context is compacted in the call only over the hard limit (or at the threshold, for a
profile that prepares nothing ahead: docs/behaviour.md#prepared-compaction); a failure is
logged and the context returned anyway; over the hard limit the
context is truncated (docs/behaviour.md#hard-truncation, #pre-call-check). After the call the
model's real usage decides, and a background compaction is queued
(docs/behaviour.md#post-call-check). After a failed automatic compaction the session cools down for
the profile's `cooldown_seconds` (docs/behaviour.md#cooldown; services/background/cooldown.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from compaction import Policy, PolicyError, TruncateResult, hard_truncate
from sessions_app.models import Compaction, CompactionJob, CompactionProfile, Session
from sessions_app.services.background.cooldown import in_cooldown, note_outcome
from sessions_app.services.background.jobs import queue_compaction
from sessions_app.services.compacting.ahead import applied_at_threshold, queue_prepare
from sessions_app.services.compacting.prepared import apply_prepared
from sessions_app.services.compacting.session_compaction import CompactionOutcome, compact_session
from sessions_app.services.compacting.writeback import CommitMeta, commit_context, take_snapshot
from sessions_app.services.context.runtime import Format, context_payload
from sessions_app.services.errors import Conflict, ServiceError
from sessions_app.services.sessions.lifecycle import reload_totals
from sessions_app.services.sessions.policies import policy_for, profile_for
from sessions_app.services.sessions.state import Change, advance
from sessions_app.services.sessions.threshold import (
    Standing,
    reserved_over_threshold,
    session_standing,
    standing,
    usage_standing,
)
from sessions_app.services.sessions.usage import reported_usage, same_usage

__all__ = [
    "PreCall",
    "PreparedContext",
    "StoredCompaction",
    "check_wanted",
    "enforce_hard_limit",
    "post_call_check",
    "precompact",
    "prepare_context",
]

logger = logging.getLogger("sessions_app")


@dataclass(frozen=True, slots=True)
class StoredCompaction:
    """The compaction (or truncation) a pre-call check stored, in brief."""

    number: int
    status: str
    trigger: str
    tokens_before: int
    tokens_after: int
    failure_reason: str | None


@dataclass(frozen=True, slots=True)
class PreparedContext:
    """The context after the pre-call check, as `context_payload` shapes it, and what ran.

    `compaction` is the compaction stored now (None when none was); `skipped` says why
    nothing ran (below_threshold, disabled, cooldown, or the engine's reason).
    """

    system: Any
    messages: list[Any]
    tokens: int
    limit: int | None
    usage: float | None
    compaction: StoredCompaction | None
    skipped: str | None

    def to_dict(self) -> dict[str, Any]:
        """The `POST .../context/prepare` answer."""
        return asdict(self)


def prepare_context(session: Session, *, fmt: Format = "anthropic") -> PreparedContext:
    """The pre-LLM-call check (`precompact`, on the session's counts read now), then the
    context."""
    profile = profile_for(session)
    reload_totals(session)  # appends made meanwhile count
    checked = precompact(session, profile)
    payload = context_payload(session, fmt, profile=profile)
    return PreparedContext(
        system=payload.system,
        messages=payload.messages,
        tokens=payload.tokens,
        limit=payload.limit,
        usage=payload.usage,
        compaction=_summary_of(checked.compaction),
        skipped=checked.skipped,
    )


@dataclass(frozen=True, slots=True)
class PreCall:
    """What a pre-call check did: the compaction it stored (applied, compacted or truncated:
    None when none was) and why nothing ran (`skipped`: disabled, below_threshold,
    reserved_over_threshold, cooldown, preparing, or the engine's reason)."""

    compaction: Compaction | None
    skipped: str | None

    @property
    def stored(self) -> StoredCompaction | None:
        """The stored compaction in brief (the proxy's plan carries it)."""
        return _summary_of(self.compaction)


def check_wanted(session: Session, profile: CompactionProfile, reported: int | None = None) -> bool:
    """Whether a check has anything to do: the session's stored counts (or a model's
    `reported` usage) are at the threshold or past the soft one, `prepare_at`."""
    if reported is None:
        place = session_standing(session, profile)  # the reserved overhead counted
    else:
        place = usage_standing(policy_for(session, profile), reported, profile.prepare_at)
    return place.over_threshold or place.prepare


def precompact(session: Session, profile: CompactionProfile) -> PreCall:
    """The pre-call check on the session's loaded counts (docs/behaviour.md#pre-call-check,
    #prepared-compaction): past the soft threshold a compaction is prepared in the
    background; at the threshold a prepared one is applied at once; none ready, the request
    goes on uncompacted unless the context is over the hard limit, when it is compacted now.
    A profile without `prepare_at` compacts in the request at the threshold. Last, a context
    still over the hard limit is hard-truncated."""
    policy = policy_for(session, profile)
    place = session_standing(session, profile)
    skipped = _skipped(session, policy, place)
    stored: Compaction | None = None
    if skipped is None and profile.prepare_at is None:
        stored, skipped = _compacted(session, profile)
    elif skipped is None:
        stored, skipped = _ahead(session, profile, place)
    truncation = enforce_hard_limit(session, profile, policy)
    return PreCall(truncation or stored, skipped)


def _skipped(session: Session, policy: Policy, place: Standing) -> str | None:
    """Why the pre-call check does nothing (None: it acts)."""
    if not policy.enabled:
        return "disabled"
    if not place.over_threshold and not place.prepare:
        return "below_threshold"
    if reserved_over_threshold(policy):  # the engine's skip, without reading the context
        return "reserved_over_threshold"
    if in_cooldown(session):
        logger.info(
            "automatic compaction skipped: cooling down after a failure",
            extra={"session_id": str(session.pk), "trigger": "auto", "outcome": "cooldown"},
        )
        return "cooldown"
    return None


def _ahead(
    session: Session, profile: CompactionProfile, place: Standing
) -> tuple[Compaction | None, str | None]:
    """Apply the prepared compaction at the threshold; compact now only over the hard limit
    with none (enough) ready; else prepare one in the background."""
    applied, place = applied_at_threshold(session, profile, place)
    if place.over_hard_limit:  # this request cannot go without a compaction: it waits
        compacted, skipped = _compacted(session, profile)
        return compacted or applied, skipped if compacted is None and applied is None else None
    if place.prepare:
        queue_prepare(session)
    if applied is not None:
        return applied, None
    return None, "preparing" if place.over_threshold else "below_threshold"


def _compacted(
    session: Session, profile: CompactionProfile
) -> tuple[Compaction | None, str | None]:
    """An automatic compaction now: the row stored, or why none was."""
    outcome = _compact_logged(session, profile)
    if outcome is None:
        return None, None
    return outcome.compaction, (outcome.reason if not outcome.compaction else None)


def post_call_check(
    session: Session, messages: Sequence[Mapping[str, Any]]
) -> CompactionJob | None:
    """After appending a model reply: record its `usage`; queue a compaction when over.

    The usage is written unless `session.last_usage` already holds it (`append_messages`
    records it in the append's own transaction). Returns the queued job, or None (no usage,
    under the threshold, disabled, cooling down, or a compaction already queued or running
    for the session).
    """
    usage = reported_usage(messages)
    if usage is None:
        return None
    if not same_usage(session.last_usage, usage):
        Session.objects.filter(pk=session.pk).update(**advance(session, Change(usage=usage)))
    total = usage["total_tokens"]
    profile = profile_for(session)
    policy = policy_for(session, profile)
    place = usage_standing(policy, total, profile.prepare_at)
    if not place.over_threshold and not place.prepare:
        return None
    if in_cooldown(session) or _window_too_small(session, policy):
        return None
    if not place.over_threshold:  # past the soft threshold: prepare the next compaction
        return queue_prepare(session)
    if profile.prepare_at is not None and apply_prepared(session) is not None:
        return None  # docs/behaviour.md#prepared-compaction
    return _queue_forced(session, total)


def _queue_forced(session: Session, total: int) -> CompactionJob | None:
    """A forced background compaction after a reported usage over the threshold."""
    # The model's own count decides (docs/behaviour.md#post-call-check): it sees tool definitions
    # and overheads the stored messages do not, so the job compacts even if the stored count is
    # lower.
    job, queued = queue_compaction(
        session, params={"trigger": Compaction.Trigger.AUTO, "force": True}
    )
    if not queued:
        return None
    logger.info(
        "real usage over the threshold: compaction queued",
        extra={"session_id": str(session.pk), "trigger": "auto", "tokens": total},
    )
    return job


def _window_too_small(session: Session, policy: Policy) -> bool:
    """True (and logged) when the session's stored system prompt and tools alone reach the
    threshold (docs/behaviour.md#reserved-tokens): a compaction could not bring a call
    under it, and one would be queued after every call."""
    if not reserved_over_threshold(policy):
        return False
    logger.warning(
        "real usage over the threshold, but the system prompt and tools alone reach it: "
        "no compaction queued (the profile's window is too small for them)",
        extra={"session_id": str(session.pk), "trigger": "auto", "outcome": "skipped"},
    )
    return True


def _compact_logged(session: Session, profile: CompactionProfile) -> CompactionOutcome | None:
    try:
        outcome = compact_session(session, trigger=Compaction.Trigger.AUTO, profile=profile)
    except Conflict as error:
        logger.info(
            "automatic compaction lost a race: %s",
            error,
            extra={"session_id": str(session.pk), "trigger": "auto", "outcome": "conflict"},
        )
        return None
    except Exception:
        logger.exception(
            "automatic compaction raised; the context is returned uncompacted",
            extra={"session_id": str(session.pk), "trigger": "auto", "outcome": "error"},
        )
        return None
    note_outcome(session, outcome, profile)
    return outcome


def enforce_hard_limit(
    session: Session,
    profile: CompactionProfile,
    policy: Policy,
    *,
    trigger: str = Compaction.Trigger.HARD_LIMIT,
) -> Compaction | None:
    """Hard truncation when the context is still over the hard limit
    (docs/behaviour.md#hard-truncation), recorded with `trigger`."""
    reload_totals(session)
    if not standing(policy, session.context_tokens).over_hard_limit:
        return None
    snapshot = take_snapshot(session)
    try:
        result = hard_truncate([*snapshot.messages], policy, token_counts=snapshot.token_counts)
    except PolicyError as error:  # the reserved system prompt and tools alone leave no room
        logger.warning(
            "hard-limit truncation impossible: %s",
            error,
            extra={"session_id": str(session.pk), "trigger": "hard_limit", "outcome": "failed"},
        )
        return None
    if not result.truncated:
        return None
    meta = _truncation_meta(profile, policy, result)
    meta.trigger = trigger
    try:
        compaction = commit_context(snapshot, result.messages, meta)
    except (ServiceError, OSError) as error:
        logger.error(
            "hard-limit truncation failed: %s",
            error,
            extra={"session_id": str(session.pk), "trigger": "hard_limit", "outcome": "failed"},
        )
        return None
    logger.warning(
        "context truncated to the hard limit: %d -> %d tokens",
        result.tokens_before,
        result.tokens_after,
        extra={"session_id": str(session.pk), "trigger": "hard_limit", "outcome": "truncated"},
    )
    reload_totals(session)
    return compaction


def _truncation_meta(
    profile: CompactionProfile, policy: Policy, result: TruncateResult
) -> CommitMeta:
    """How a hard-limit truncation is recorded (its Compaction row)."""
    return CommitMeta(
        trigger=Compaction.Trigger.HARD_LIMIT,
        strategy=f"{profile.name}: hard_truncate",
        encoding=policy.encoding,
        stats={
            "original_token_count": result.tokens_before,
            "compacted_token_count": result.tokens_after,
            "compaction_ratio": result.tokens_after / result.tokens_before
            if result.tokens_before
            else None,
            "compacted_message_count": result.removed_message_count,
            "retained_message_count": len(result.messages),
        },
        details={
            "profile": profile.name,
            "policy": policy.to_dict(),
            "detail": dict(result.detail),
        },
    )


def _summary_of(compaction: Compaction | None) -> StoredCompaction | None:
    if compaction is None:
        return None
    return StoredCompaction(
        number=compaction.number,
        status=compaction.status,
        trigger=compaction.trigger,
        tokens_before=compaction.tokens_before,
        tokens_after=compaction.tokens_after,
        failure_reason=compaction.failure_reason or None,
    )
