"""Failed compaction attempts, kept as `failed` Compaction rows for the log.

The row names its underlying error (services/compacting/failure_errors.py); the context is
untouched.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from compaction import FailureCause
from sessions_app.models import Compaction, Session
from sessions_app.nul import strip_nul
from sessions_app.services.compacting.failure_errors import with_failure_error
from sessions_app.services.compacting.writeback import CommitMeta, next_number, policy_in_force

__all__ = ["record_failure"]

logger = logging.getLogger("sessions_app")


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
                details=strip_nul(with_failure_error(meta.details, reason, error, cause=cause)),
                **policy_in_force(meta.details),
            )
    except Session.DoesNotExist:
        return None
    except Exception:
        logger.exception("could not record a failed compaction", extra={"session": str(session.pk)})
        return None
