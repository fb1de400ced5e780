"""What a check does once a session is past its soft threshold or at its threshold, when its
profile prepares compactions ahead of time (docs/behaviour.md#prepared-compaction).

At the threshold, a prepared compaction is applied at once (`apply_prepared`: one
transaction, no model call). Past the soft threshold, one is prepared in the background:
`queue_prepare` queues the job of kind "prepare" (services/background/jobs.py; at most one
active job per session). Whether a session is past either is services/sessions/threshold.py's
answer (`Standing.prepare`, `over_threshold`, `over_hard_limit`); the pre-call and post-call
checks (services/compacting/auto.py) decide with it which of these to do.
"""

from __future__ import annotations

import logging

from sessions_app.models import Compaction, CompactionJob, CompactionProfile, Session
from sessions_app.services.background.jobs import PREPARE, active_job, queue_compaction
from sessions_app.services.compacting.prepared import apply_prepared, ready_prepared
from sessions_app.services.sessions.threshold import Standing, session_standing

__all__ = ["applied_at_threshold", "queue_prepare"]

logger = logging.getLogger("sessions_app")


def queue_prepare(session: Session) -> CompactionJob | None:
    """Queue the background preparation of the session's next compaction; None when one is
    ready for its current entries, or a job of the session is queued or running (two
    reads: a request past the soft threshold writes nothing when there is nothing to do)."""
    if ready_prepared(session) or active_job(session) is not None:
        return None
    job, queued = queue_compaction(
        session, params={"kind": PREPARE, "trigger": Compaction.Trigger.AUTO}
    )
    if not queued:
        return None
    logger.info(
        "compaction to prepare queued",
        extra={"session_id": str(session.pk), "job": str(job.pk), "trigger": "auto"},
    )
    return job


def applied_at_threshold(
    session: Session, profile: CompactionProfile, place: Standing
) -> tuple[Compaction | None, Standing]:
    """At the threshold (`place.over_threshold`), the session's prepared compaction applied
    now, and where the session stands afterwards; (None, `place`) when none was ready."""
    if not place.over_threshold:
        return None, place
    applied = apply_prepared(session)
    if applied is None:
        return None, place
    return applied, session_standing(session, profile)
