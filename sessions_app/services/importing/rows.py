"""Rows of an imported session shared by storing (store.py) and updating (merge.py): a
message, an imported compaction point, the session's import metadata and its times."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.utils import timezone

from sessions_app.importers import ImportedCompaction, ImportedMessage, ImportedSession
from sessions_app.models import Compaction, Message, Session
from sessions_app.unstorable import clean

__all__ = [
    "IMPORT_KEY",
    "Span",
    "anchors",
    "compaction_key",
    "compaction_row",
    "details_of",
    "message_row",
    "metadata_of",
    "stamp_times",
]

#: Key of Message.extra holding what the importer learned about a message (source ids,
#: tool results' raw data, blocks kept aside, repairs made).
IMPORT_KEY: Final = "import"


def message_row(
    session: Session, seq: int, item: ImportedMessage, tokens: int, when: datetime
) -> Message:
    """The (unsaved) Message row of one imported message; `when` stands in for a missing
    time."""
    extra = {k: v for k, v in item.message.items() if k not in {"role", "content"}}
    if item.usage:
        extra["usage"] = item.usage
    if item.extra:
        extra[IMPORT_KEY] = item.extra
    return Message(
        session=session,
        seq=seq,
        role=item.role,
        content=item.message["content"],
        extra=extra,
        token_count=tokens,
        original_id=item.original_id[:200],
        created_at=item.created_at or when,
    )


@dataclass(frozen=True)
class Span:
    """What an imported compaction replaced: its history range, the context positions it
    freed, tokens before and after, entries replaced and entries kept before them."""

    first_seq: int | None
    last_seq: int | None
    positions: list[int]
    tokens_before: int
    tokens_after: int
    replaced: int
    retained: int
    #: Where the compaction came: `seq.k`, the k-th one after the message `seq` (-1: none);
    #: part of the key that recognises it when the transcript is read again (merge.py).
    anchor: str


def compaction_row(
    session: Session, number: int, source: ImportedSession, item: ImportedCompaction, span: Span
) -> Compaction:
    """Create the Compaction row (trigger `imported`) of one compaction the agent made."""
    before, after = span.tokens_before, span.tokens_after
    return Compaction.objects.create(
        session=session,
        number=number,
        created_at=item.created_at or timezone.now(),
        trigger=Compaction.Trigger.IMPORTED,
        strategy="imported",
        summarizer=f"{source.source_format} (imported)"[:128],
        model=source.model[:128],
        first_seq=span.first_seq,
        last_seq=span.last_seq,
        first_position=min(span.positions) if span.positions else None,
        last_position=max(span.positions) if span.positions else None,
        summary=item.summary,
        tokens_before=before,
        tokens_after=after,
        messages_before=span.retained + span.replaced,
        messages_after=span.retained + 1,
        compacted_message_count=span.replaced,
        retained_message_count=span.retained,
        ratio=round(after / before, 6) if before else None,
        status=Compaction.Status.SUCCEEDED,
        details={
            **details_of(source, item),
            "source_key": compaction_key(item.original_id, item.summary, span.anchor),
        },
    )


def compaction_key(original_id: str, summary: str, anchor: str) -> str:
    """How an imported compaction is recognised: its source id, its summary's hash and the
    place it came (a Codex `window_id` may be compacted more than once, with the same
    summary)."""
    digest = hashlib.sha256(summary.encode("utf-8", "replace")).hexdigest()[:32]
    return f"{original_id}|{digest}|{anchor}"


def anchors(compactions: list[ImportedCompaction], seqs: Callable[[int], int]) -> list[str]:
    """Each compaction's anchor (`Span.anchor`); `seqs(i)` is the stored seq of parsed message
    `i` (i = -1: the one before the part read, -1 at the start)."""
    seen: dict[int, int] = {}
    found = []
    for item in compactions:
        seq = seqs(item.at_message - 1)
        seen[seq] = seen.get(seq, -1) + 1
        found.append(f"{seq}.{seen[seq]}")
    return found


def stamp_times(session: Session, first: datetime | None, last: datetime | None) -> None:
    """The session's created and last-activity times from its transcript's first and last
    message times (saving would put the import time: `updated_at` is `auto_now`)."""
    values = {
        name: value
        for name, value in (("created_at", first), ("updated_at", last))
        if value is not None
    }
    if values:
        Session.objects.filter(pk=session.pk).update(**values)
        for name, value in values.items():
            setattr(session, name, value)


def metadata_of(imported: ImportedSession) -> dict[str, Any]:
    metadata = dict(imported.metadata)
    metadata["import"] = {
        "source_name": imported.source_name,
        "source_format": imported.source_format,
        "imported_at": timezone.now().isoformat(),
        "counts": imported.counts(),
        "skipped": [{"line": s.line, "reason": s.reason} for s in imported.skipped[:100]],
        "skipped_count": imported.skipped_count,
        "kept_raw": imported.kept_raw,
    }
    # File names and paths may hold lone surrogates (names undecodable as UTF-8).
    cleaned: dict[str, Any] = json.loads(json.dumps(clean(metadata), default=str))
    return cleaned


def details_of(imported: ImportedSession, compaction: Any) -> dict[str, Any]:
    details: dict[str, Any] = json.loads(
        json.dumps(
            {
                "source_format": imported.source_format,
                "source_trigger": compaction.trigger,
                "pre_tokens": compaction.pre_tokens,
                "post_tokens": compaction.post_tokens,
                "source_id": compaction.original_id,
                "source": compaction.raw,
            },
            default=str,
        )
    )
    return details
