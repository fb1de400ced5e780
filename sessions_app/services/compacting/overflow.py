"""Overflow recovery: the upstream refused a request as too long for its window
(docs/behaviour.md#overflow-recovery).

`compact_after_overflow` records the window the upstream really has as the session's
`upstream_window` (services/sessions/threshold.window_after_overflow; from then on
`policy_for` narrows the session's limit to it, so every check and compaction aims under
it), then compacts harder: a prepared compaction if one is ready, else the profile's chain
forced, then hard truncation to the window whatever the chain did, so the retry cannot be
refused the same way. Each change is a compaction point of trigger `overflow`.
"""

from __future__ import annotations

import logging

from django.db.models.functions import Least

from sessions_app.models import Compaction, CompactionProfile, Session
from sessions_app.services.compacting.auto import enforce_hard_limit
from sessions_app.services.compacting.prepared import apply_prepared
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import Conflict
from sessions_app.services.sessions.lifecycle import reload_totals
from sessions_app.services.sessions.policies import policy_for
from sessions_app.services.sessions.threshold import session_standing, window_after_overflow

__all__ = ["compact_after_overflow", "learn_window"]

logger = logging.getLogger("sessions_app")

OVERFLOW = Compaction.Trigger.OVERFLOW


def learn_window(
    session: Session, profile: CompactionProfile, *, limit: int | None, counted: int | None
) -> int:
    """Record the window of an upstream that refused the session's context as too long
    (`limit`, `counted`: its figures, when it said them); the session's loaded counts are
    what was sent. A window learned before stays when it is smaller."""
    reload_totals(session)
    sent = session_standing(session, profile).tokens
    window = window_after_overflow(sent, limit, counted)
    Session.objects.filter(pk=session.pk, upstream_window__isnull=True).update(
        upstream_window=window
    )
    Session.objects.filter(pk=session.pk).update(upstream_window=Least("upstream_window", window))
    session.refresh_from_db(fields=["upstream_window"])
    logger.warning(
        "the upstream refused %d tokens as too long: its window is taken as %d",
        sent,
        session.upstream_window,
        extra={"session_id": str(session.pk), "trigger": "overflow", "tokens": sent},
    )
    return int(session.upstream_window or window)


def compact_after_overflow(
    session: Session, profile: CompactionProfile, *, limit: int | None, counted: int | None
) -> Compaction | None:
    """Learn the upstream's window, then bring the context under it; the last compaction
    point stored (None: nothing could be changed)."""
    learn_window(session, profile, limit=limit, counted=counted)
    stored = apply_prepared(session, trigger=OVERFLOW)
    if stored is None or session_standing(session, profile).over_threshold:
        stored = _compacted(session, profile) or stored
    # Whatever the chain holds: the hard limit is the window itself now.
    policy = policy_for(session, profile).replace(hard_limit=None)
    return enforce_hard_limit(session, profile, policy, trigger=OVERFLOW) or stored


def _compacted(session: Session, profile: CompactionProfile) -> Compaction | None:
    """The profile's chain, forced (cooldown or not): the row stored when it compacted."""
    try:
        outcome = compact_session(session, trigger=OVERFLOW, profile=profile, force=True)
    except Conflict as error:  # another change won: truncation still applies below
        logger.info(
            "overflow compaction lost a race: %s",
            error,
            extra={"session_id": str(session.pk), "trigger": "overflow", "outcome": "conflict"},
        )
        return None
    reload_totals(session)
    return outcome.compaction if outcome.compacted else None
