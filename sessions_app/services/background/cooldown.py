"""The cooldown after a failed automatic compaction (profile `cooldown_seconds`).

A failed automatic compaction (or one whose summary failed) starts the cooldown and counts
the failure on the session; a successful one clears both. While a session cools down,
neither the pre-call check (services/compacting/auto.py) nor the post-call check queues another.
Jobs (services/background/jobs.py) note their outcome here too, so this module imports neither.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import F
from django.utils import timezone

from compaction import SUMMARY_FAILURES
from sessions_app.models import CompactionProfile, Session
from sessions_app.services.compacting.session_compaction import CompactionOutcome

__all__ = ["in_cooldown", "note_outcome"]


def in_cooldown(session: Session) -> bool:
    """True while automatic compaction waits after a failure (read from the database)."""
    until = Session.objects.filter(pk=session.pk).values_list("cooldown_until", flat=True).first()
    return until is not None and until > timezone.now()


def note_outcome(session: Session, outcome: CompactionOutcome, profile: CompactionProfile) -> None:
    """Start the cooldown after a failed summary; clear it after a success."""
    summary_failed = outcome.result is not None and outcome.result.reason in SUMMARY_FAILURES
    if outcome.failed or summary_failed:
        until = timezone.now() + timedelta(seconds=profile.cooldown_seconds)
        # Counted in the database: `session` may be stale (a job's copy, a concurrent run).
        Session.objects.filter(pk=session.pk).update(
            compaction_failures=F("compaction_failures") + 1, cooldown_until=until
        )
        session.refresh_from_db(fields=["compaction_failures", "cooldown_until"])
    elif outcome.compacted:
        Session.objects.filter(pk=session.pk).update(compaction_failures=0, cooldown_until=None)
        session.compaction_failures, session.cooldown_until = 0, None
