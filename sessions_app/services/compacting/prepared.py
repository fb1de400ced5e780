"""Compaction ahead of time: written in the background, applied at the threshold
(docs/behaviour.md#prepared-compaction).

`prepare_compaction` (the background job of kind "prepare", services/background/jobs.py)
reads a snapshot, runs the engine with no connection held while the summarizer answers
(`run_engine`), and keeps its output as the session's `PreparedCompaction`, in a short
transaction that checks the session's `context_revision` did not move. `apply_prepared`
(the checks at the threshold, services/compacting/ahead.py) commits it through
`writeback.commit_context`, whose revision check under the session's lock makes it apply
only to the entries it was written for: messages appended since stay verbatim after it; a
revert, offload, compaction or edit of entries since makes it stale, and it is discarded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Final

from django.db import DatabaseError, transaction
from django.utils import timezone

from compaction import CompactionError, EventHandler, Summarizer
from sessions_app.models import (
    Compaction,
    CompactionProfile,
    ContextEntry,
    PreparedCompaction,
    Session,
)
from sessions_app.services.compacting.session_compaction import (
    CompactionOutcome,
    EngineRun,
    record_not_compacted,
    run_engine,
)
from sessions_app.services.compacting.writeback import CommitMeta, ContextSnapshot, commit_context
from sessions_app.services.errors import Conflict, ServiceError, engine_error
from sessions_app.services.sessions.entries import ENTRY_KEY, tagged_message
from sessions_app.services.sessions.lifecycle import reload_totals

__all__ = ["PREPARED", "apply_prepared", "prepare_compaction", "ready_prepared"]

logger = logging.getLogger("sessions_app")

#: The reason of a prepare run whose result was kept.
PREPARED: Final = "prepared"
#: How a stored output names an entry the engine left untouched (its id).
_REF: Final = "$entry"


def prepare_compaction(
    session: Session,
    profile: CompactionProfile,
    *,
    summarizer: Summarizer | None = None,
    on_event: EventHandler | None = None,
) -> CompactionOutcome:
    """Prepare the session's next compaction and keep it (nothing is applied).

    The outcome's reason is PREPARED when it was kept, `context_changed` when the session's
    entries changed during the run; a failed summary is recorded as a failed row, as an
    automatic compaction's is.
    """
    try:
        run = run_engine(
            session,
            trigger=Compaction.Trigger.AUTO,
            profile=profile,
            force=True,
            summarizer=summarizer,
            on_event=on_event,
        )
    except CompactionError as error:
        raise engine_error(error) from error
    if not run.result.compacted:
        return record_not_compacted(session, run)
    kept = _keep(session, run)
    reason = PREPARED if kept else "context_changed"
    logger.info(
        "compaction prepared" if kept else "prepared compaction dropped: the context changed",
        extra={"session_id": str(session.pk), "trigger": "auto", "outcome": reason},
    )
    return CompactionOutcome(None, run.result, reason=reason, events=run.events)


def _keep(session: Session, run: EngineRun) -> bool:
    """Store the run's output as the session's prepared compaction, if its entries are
    still the ones it read (False otherwise: nothing is stored)."""
    snapshot = run.snapshot
    positions = [entry.position for entry in snapshot.entries]
    values = {
        "prepared_at": timezone.now(),
        "context_revision": snapshot.revision,
        "version": snapshot.version,
        "entry_ids": [entry.pk for entry in snapshot.entries],
        "pending_ids": [entry.pk for entry in snapshot.pending],
        "first_position": min(positions, default=None),
        "last_position": max(positions, default=None),
        "output": _references(snapshot, run.result.messages),
        "meta": asdict(run.meta),
        "tokens_before": snapshot.tokens,
        "tokens_after": run.result.stats.compacted_token_count + snapshot.pending_tokens,
    }
    with transaction.atomic():
        revision = (
            Session.objects.select_for_update()
            .filter(pk=session.pk)
            .values_list("context_revision", flat=True)
            .first()
        )
        if revision != snapshot.revision:
            return False
        PreparedCompaction.objects.update_or_create(session_id=session.pk, defaults=values)
    return True


def _references(
    snapshot: ContextSnapshot, output: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The output with each message the engine left untouched (the snapshot's own object)
    replaced by a reference to its entry: the kept tail is not stored twice."""
    untouched = {id(message): message[ENTRY_KEY] for message in snapshot.messages}
    return [
        {_REF: untouched[id(message)]} if id(message) in untouched else dict(message)
        for message in output
    ]


def ready_prepared(session: Session) -> bool:
    """True when the session has a prepared compaction for its current entries."""
    return PreparedCompaction.objects.filter(
        session_id=session.pk, context_revision=session.context_revision
    ).exists()


def apply_prepared(
    session: Session, *, trigger: str = Compaction.Trigger.AUTO
) -> Compaction | None:
    """Commit the session's prepared compaction now, as a compaction point with `trigger`
    and its `prepared_at`; None when there is none, or it is stale (then discarded).

    No model is called: one transaction (writeback.commit_context). `session` is
    refreshed when it applied.
    """
    prepared = PreparedCompaction.objects.filter(session_id=session.pk).first()
    if prepared is None:
        return None
    snapshot = _snapshot_of(prepared)
    if snapshot is None:
        _discard(prepared, "its entries changed")
        return None
    meta = CommitMeta(**{**prepared.meta, "trigger": trigger, "prepared_at": prepared.prepared_at})
    meta.details = {**meta.details, "prepared": _prepared_details(prepared, snapshot)}
    try:
        compaction = commit_context(snapshot, _resolved(prepared.output, snapshot), meta)
    except Conflict:
        _discard(prepared, "the context changed while it was applied")
        return None
    except (ServiceError, DatabaseError, OSError) as error:  # kept: it may apply next time
        logger.error(
            "prepared compaction could not be applied: %s",
            error,
            extra={"session_id": str(session.pk), "trigger": trigger, "outcome": "failed"},
        )
        return None
    PreparedCompaction.objects.filter(pk=prepared.pk).delete()  # stale now in any case
    session.refresh_from_db()
    reload_totals(session)
    logger.info(
        "prepared compaction applied: #%d",
        compaction.number,
        extra={"session_id": str(session.pk), "trigger": trigger, "outcome": "compacted"},
    )
    return compaction


def _snapshot_of(prepared: PreparedCompaction) -> ContextSnapshot | None:
    """The entries the prepared compaction was written for, as they are now; None when the
    session's entries changed since (its revision moved, or one of them is gone)."""
    session = Session.objects.filter(pk=prepared.session_id).first()
    if session is None or session.context_revision != prepared.context_revision:
        return None
    wanted = [*prepared.entry_ids, *prepared.pending_ids]
    rows = ContextEntry.objects.filter(session=session, pk__in=wanted).select_related("message")
    by_id = {entry.pk: entry for entry in rows}
    if len(by_id) != len(set(wanted)):
        return None
    entries = [by_id[pk] for pk in prepared.entry_ids]
    return ContextSnapshot(
        session=session,
        revision=prepared.context_revision,
        version=session.version,
        entries=entries,
        messages=[tagged_message(entry) for entry in entries],
        pending=[by_id[pk] for pk in prepared.pending_ids],
    )


def _resolved(output: Sequence[Mapping[str, Any]], snapshot: ContextSnapshot) -> list[Any]:
    """The stored output with each reference replaced by the snapshot's own message."""
    by_id = {message[ENTRY_KEY]: message for message in snapshot.messages}
    return [by_id[item[_REF]] if _REF in item else dict(item) for item in output]


def _prepared_details(prepared: PreparedCompaction, snapshot: ContextSnapshot) -> dict[str, Any]:
    """What the compaction's details say about its preparation (the log shows it)."""
    session = snapshot.session
    return {
        "at": prepared.prepared_at.isoformat(),
        "version": prepared.version,
        "context_revision": prepared.context_revision,
        "positions": [prepared.first_position, prepared.last_position],
        "entries_appended_since": session.context_entry_count
        - len(snapshot.entries)
        - len(snapshot.pending),
    }


def _discard(prepared: PreparedCompaction, why: str) -> None:
    PreparedCompaction.objects.filter(pk=prepared.pk).delete()
    logger.info(
        "prepared compaction discarded: %s",
        why,
        extra={"session_id": str(prepared.session_id), "outcome": "discarded"},
    )
