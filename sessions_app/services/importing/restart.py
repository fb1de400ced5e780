"""Whether a transcript read again from its start still begins with what its session holds.

The watcher reads a file again from its start when it shrank or changed where it was read
before (services/importing/watching.py). When the file still begins with every message its session
stored (rewritten with the same lines, and maybe more), the session goes on; when it holds
only the first of them (truncated), the session keeps them all and waits; when a message
differs (the file was truncated and written anew, rotated, or replaced by another
conversation), its content is a new session and the stored one is kept as it was
(docs/behaviour.md, "Watched files that shrink or are replaced").
"""

from __future__ import annotations

from typing import Final

from django.utils import timezone

from sessions_app.canonical import canonical_json
from sessions_app.importers import ImportedMessage, ImportedSession
from sessions_app.models import Message, Session
from sessions_app.services.importing.rows import message_row

__all__ = ["BEHIND", "CONTINUES", "DIVERGED", "compare", "mark_restart"]

#: Stored messages read per query while comparing.
CHUNK: Final = 500
CONTINUES: Final = "continues"
BEHIND: Final = "behind"
DIVERGED: Final = "diverged"


def compare(session: Session, imported: ImportedSession, start: int = 0) -> str:
    """How `imported` (a file read from its start, or from the cut where message `start`
    was read) stands to the messages stored in `session` from `start`, compared over the
    messages both have: `CONTINUES` (it holds them all, maybe more), `BEHIND` (it holds
    fewer, all stored: a truncated file), `DIVERGED` (a message differs: another
    conversation, other lines after a truncation, a rewound history). Messages are the
    same with the same role and source id (where both have one), else the same content in
    canonical form (sessions_app/canonical.py); the last message compared may have grown (a
    reply still streaming)."""
    stored = Message.objects.filter(session=session, seq__gte=start)
    count = stored.count()
    overlap = min(count, len(imported.messages))
    rows = stored.filter(seq__lt=start + overlap).order_by("seq")
    for offset in range(0, overlap, CHUNK):
        for row in rows[offset : offset + CHUNK]:
            index = row.seq - start
            if not _same(row, imported.messages[index], last=index == overlap - 1):
                return DIVERGED
    return CONTINUES if overlap == count else BEHIND


def _same(row: Message, item: ImportedMessage, *, last: bool) -> bool:
    # A system message read first in a part is stored as a marked user message (merge.py).
    if row.role != item.role and not (item.role == "system" and row.role == "user"):
        return False
    source_id = item.original_id[:200]
    if row.original_id and source_id:
        return bool(row.original_id == source_id)
    if last:
        return True
    fresh = message_row(row.session, row.seq, item, 0, row.created_at)
    return canonical_json({"role": row.role, "content": fresh.content}) == canonical_json(
        {"role": row.role, "content": row.content}
    )


def mark_restart(previous: Session, current: Session, reason: str) -> None:
    """Note on both sessions where the file restarted: the earlier session keeps what it
    stored and gives up the file; the new one holds what the file holds now."""
    when = timezone.now().isoformat()
    Session.objects.filter(pk=previous.pk).update(
        source_path="",
        metadata={
            **previous.metadata,
            "file_restarted": {"at": when, "reason": reason, "next_session": str(current.pk)},
        },
    )
    current.refresh_from_db(fields=["metadata"])
    Session.objects.filter(pk=current.pk).update(
        metadata={
            **current.metadata,
            "restarted_file": {"at": when, "reason": reason, "previous_session": str(previous.pk)},
        }
    )
