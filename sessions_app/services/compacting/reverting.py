"""Undoing a compaction: its archived entries come back exactly, at their old positions."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from django.db import transaction
from django.utils import timezone

from sessions_app.models import Compaction, ContextEntry, Session
from sessions_app.services.compacting.archives import ArchivedEntry, read_archive
from sessions_app.services.compacting.writeback import save_entry_counters
from sessions_app.services.errors import Conflict, NotFound

__all__ = ["revert_compaction", "revert_refusal", "revertable_numbers"]

logger = logging.getLogger("sessions_app")


def revert_compaction(session: Session, number: int) -> Compaction:
    """Restore the entries compaction `number` replaced; it becomes `reverted`.

    Only the newest compaction over a region can be reverted (`revert_refusal`): when a
    later one covers any of its entries, Conflict names the one to revert first. Raises
    NotFound for an unknown number and ArchiveUnavailable when the archive cannot be read.
    """
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        compaction = Compaction.objects.filter(session=locked, number=number).first()
        if compaction is None:
            raise NotFound(f"no compaction #{number}")
        refusal = revert_refusal(compaction, _in_effect(locked))
        if refusal is not None:
            raise refusal
        archive = read_archive(compaction)
        ContextEntry.objects.filter(session=locked, compaction=compaction).delete()
        ContextEntry.objects.bulk_create([_restored(locked, item) for item in archive.entries])
        for item in archive.transformed:
            if item.id is None:  # a transformed entry always has an id; skip a damaged one
                continue
            ContextEntry.objects.filter(session=locked, pk=item.id).update(
                content=item.content, extra=item.extra, token_count=item.token_count
            )
        Compaction.objects.filter(session=locked, parent=compaction).update(parent=None)
        compaction.status = Compaction.Status.REVERTED
        compaction.details = {**compaction.details, "reverted_at": timezone.now().isoformat()}
        compaction.save(update_fields=["status", "details"])
        save_entry_counters(locked)
    logger.info(
        "compaction reverted",
        extra={"session_id": str(session.pk), "compaction": number, "outcome": "reverted"},
    )
    session.refresh_from_db()
    return compaction


def revert_refusal(compaction: Compaction, in_effect: Iterable[Compaction]) -> Conflict | None:
    """Why `compaction` cannot be reverted now (the Conflict `revert_compaction` raises), or
    None when it can: the one rule, asked by the pages before they offer a revert.

    `in_effect` holds the succeeded compactions of its session (more rows are ignored; the
    compaction log passes every row it shows). A compaction (or an offload's record) can be
    reverted when it succeeded and no compaction still in effect covers it: neither its
    parent (the one that re-summarized its summary) nor a newer one whose position range
    overlaps its own.
    """
    number = compaction.number
    if compaction.status != Compaction.Status.SUCCEEDED:
        return Conflict(f"compaction #{number} is {compaction.status}: nothing to revert")
    blocker = _blocker(compaction, in_effect)
    if blocker is None:
        return None
    return Conflict(
        f"compaction #{number} is covered by the newer compaction #{blocker.number}: "
        f"revert #{blocker.number} first",
        blocking=blocker.number,
    )


def revertable_numbers(compactions: Sequence[Compaction]) -> set[int]:
    """The numbers of `compactions` (every row of one session) `revert_refusal` allows."""
    return {c.number for c in compactions if revert_refusal(c, compactions) is None}


def _in_effect(session: Session) -> list[Compaction]:
    return list(Compaction.objects.filter(session=session, status=Compaction.Status.SUCCEEDED))


def _blocker(compaction: Compaction, in_effect: Iterable[Compaction]) -> Compaction | None:
    succeeded = {
        c.pk: c
        for c in in_effect
        if c.status == Compaction.Status.SUCCEEDED and c.session_id == compaction.session_id
    }
    newer = _newest_overlapping(compaction, succeeded.values())
    parent = succeeded.get(compaction.parent_id) if compaction.parent_id is not None else None
    return newer or parent


def _newest_overlapping(
    compaction: Compaction, succeeded: Iterable[Compaction]
) -> Compaction | None:
    first, last = compaction.first_position, compaction.last_position
    if first is None or last is None:
        return None
    overlapping = [
        c
        for c in succeeded
        if c.number > compaction.number
        and c.first_position is not None
        and c.last_position is not None
        and c.first_position <= last
        and c.last_position >= first
    ]
    return max(overlapping, key=lambda c: c.number, default=None)


def _restored(session: Session, item: ArchivedEntry) -> ContextEntry:
    return ContextEntry(
        pk=item.id,
        session=session,
        position=item.position,
        kind=item.kind,
        message_id=item.message_id,
        compaction_id=item.compaction_id,
        role=item.role,
        content=item.content,
        extra=item.extra,
        token_count=item.token_count,
    )
