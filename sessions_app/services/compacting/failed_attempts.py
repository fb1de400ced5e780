"""Failed compaction attempts, kept as `failed` Compaction rows for the log.

The row names its underlying error (services/compacting/failure_errors.py) and says in one
sentence which summarizer and host failed and what to do (`details["error"]["advice"]`,
services/compacting/failure_advice.py); the context is untouched. A run whose summarizer
could not even be set up (its key variable unset...) gets its row too
(`record_setup_failure`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from compaction import FailureCause, Summarizer
from sessions_app.models import Compaction, CompactionProfile, Session
from sessions_app.nul import strip_nul
from sessions_app.services.compacting.failure_advice import (
    SETUP_FAILURE,
    failure_advice,
    summarizer_target,
)
from sessions_app.services.compacting.failure_errors import with_failure_error
from sessions_app.services.compacting.writeback import CommitMeta, next_number, policy_in_force
from sessions_app.services.errors import ServiceError, Unavailable
from sessions_app.services.sessions.policies import profile_for, summarizer_for

__all__ = [
    "REFUSED",
    "SummarizerSetupError",
    "record_failure",
    "record_job_failure",
    "record_setup_failure",
    "setup_summarizer",
]

logger = logging.getLogger("sessions_app")

#: The failure reason of a job a service refused before any attempt (an unknown profile...).
REFUSED: Final = "refused"


def record_failure(
    session: Session,
    meta: CommitMeta,
    reason: str,
    *,
    tokens_before: int = 0,
    messages: int = 0,
    error: BaseException | None = None,
    cause: FailureCause | None = None,
) -> Compaction | None:
    """A failed attempt as a Compaction row (status failed; details["error"] names the error,
    services/compacting/failure_errors.py: `error` a failure at commit, `cause` the engine's
    failure);
    the context is untouched. Best effort: logged, else None."""
    try:
        with transaction.atomic():
            locked = Session.objects.select_for_update().get(pk=session.pk)
            return Compaction.objects.create(
                session=locked,
                number=next_number(locked),
                created_at=timezone.now(),
                trigger=meta.trigger,
                strategy=meta.strategy[:64],
                summarizer=meta.summarizer[:128],
                model=meta.model[:128],
                # PostgreSQL stores no NUL; the failure must be recorded all the same.
                instructions=strip_nul(meta.instructions),
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                messages_before=messages,
                messages_after=messages,
                duration_ms=meta.duration_ms,
                status=Compaction.Status.FAILED,
                failure_reason=strip_nul(reason[:64]),
                details=strip_nul(_details(meta, reason, error, cause)),
                **policy_in_force(meta.details),
            )
    except Session.DoesNotExist:
        return None
    except Exception:
        logger.exception("could not record a failed compaction", extra={"session": str(session.pk)})
        return None


def _details(
    meta: CommitMeta, reason: str, error: BaseException | None, cause: FailureCause | None
) -> dict[str, Any]:
    """The row's details: the run's, with its error record and that record's advice."""
    details = with_failure_error(meta.details, reason, error, cause=cause)
    profile = CompactionProfile.objects.select_related("summarizer_config").filter(
        name=str(meta.details.get("profile") or "")
    )
    target = summarizer_target(profile.first())
    details["error"]["advice"] = failure_advice(details["error"], target)
    return details


def record_job_failure(
    session: Session, params: Mapping[str, Any], reason: str, error: ServiceError
) -> Compaction | None:
    """A background job that ended without an attempt's own row (a service refused it, or
    it lost a conflict on its last attempt) as a failed row of `reason`, so that every
    failed job has one in the log; its profile is the job's, else the session's."""
    try:
        profile = profile_for(session, params.get("profile"))
    except ServiceError:
        profile = profile_for(session)
    trigger = str(params.get("trigger") or "manual")
    meta = CommitMeta(
        trigger=trigger, strategy=f"{profile.name}: none", details={"profile": profile.name}
    )
    return record_failure(session, meta, reason, error=error)


def record_setup_failure(
    session: Session, profile: CompactionProfile, trigger: str, error: ServiceError
) -> Compaction | None:
    """A run that stopped before the engine (its summarizer could not be set up: `error`)
    as a failed row of reason SETUP_FAILURE, naming the configuration and its host."""
    meta = CommitMeta(
        trigger=trigger, strategy=f"{profile.name}: none", details={"profile": profile.name}
    )
    return record_failure(session, meta, SETUP_FAILURE, error=error)


class SummarizerSetupError(Exception):
    """A run's summarizer could not be set up: its failed row and the sentence saying why."""

    def __init__(self, text: str, row: Compaction | None) -> None:
        super().__init__(text)
        self.text, self.row = text, row


def setup_summarizer(session: Session, profile: CompactionProfile, trigger: str) -> Summarizer:
    """The profile's summarizer for a run of `session`; one that cannot be set up (its key
    variable unset, its SDK missing...) is a failed row in the log like any failed attempt,
    and a SummarizerSetupError whose text names the reason and the error (the row adds
    what to do)."""
    try:
        return summarizer_for(profile, session)
    except Unavailable as error:
        row = record_setup_failure(session, profile, trigger, error)
        logger.warning(
            "compaction failed: %s",
            error,
            extra={"session_id": str(session.pk), "reason": SETUP_FAILURE},
        )
        raise SummarizerSetupError(f"compaction failed: {SETUP_FAILURE}: {error}", row) from None
