"""Undoing a compaction: its archived entries come back exactly, at their old positions."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from ..models import Compaction, ContextEntry, Session
from .archives import ArchivedEntry, read_archive
from .errors import Conflict, NotFound
from .writeback import refresh_session_totals

__all__ = ["blocking_compaction", "revert_compaction"]

logger = logging.getLogger("sessions_app")


def revert_compaction(session: Session, number: int) -> Compaction:
    """Restore the entries compaction `number` replaced; it becomes `reverted`.

    Only the newest compaction over a region can be reverted: when a later one covers any
    of its entries, Conflict names the one to revert first. Raises NotFound for an unknown
    number and ArchiveUnavailable when the archive cannot be read.
    """
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        compaction = Compaction.objects.filter(session=locked, number=number).first()
        if compaction is None:
            raise NotFound(f"no compaction #{number}")
        if compaction.status != Compaction.Status.SUCCEEDED:
            raise Conflict(f"compaction #{number} is {compaction.status}: nothing to revert")
        blocker = blocking_compaction(compaction)
        if blocker is not None:
            raise Conflict(
                f"compaction #{number} is covered by the newer compaction #{blocker.number}: "
                f"revert #{blocker.number} first",
                blocking=blocker.number,
            )
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
        refresh_session_totals(locked)
    logger.info(
        "compaction reverted",
        extra={"session_id": str(session.pk), "compaction": number, "outcome": "reverted"},
    )
    session.refresh_from_db()
    return compaction


def blocking_compaction(compaction: Compaction) -> Compaction | None:
    """The newest later compaction still in effect that covers part of `compaction`'s region."""
    if compaction.parent_id is not None:
        parent = Compaction.objects.filter(pk=compaction.parent_id).first()
        if parent is not None and parent.status == Compaction.Status.SUCCEEDED:
            newer = _newest_overlapping(compaction)
            return newer or parent
    return _newest_overlapping(compaction)


def _newest_overlapping(compaction: Compaction) -> Compaction | None:
    if compaction.first_position is None or compaction.last_position is None:
        return None
    return (
        Compaction.objects.filter(
            session_id=compaction.session_id,
            status=Compaction.Status.SUCCEEDED,
            number__gt=compaction.number,
            first_position__lte=compaction.last_position,
            last_position__gte=compaction.first_position,
        )
        .order_by("-number")
        .first()
    )


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
