"""Updating a stored imported session from a newer read of its transcript.

Re-importing a transcript (by the watcher, an upload, the API or the CLI) never makes a
duplicate: the parsed messages are matched, in order, with the stored ones from `start_seq`
(the whole history for a full re-import, the last clean cut for the watcher: cuts.py). A
stored message matches when its role is the same and, where both have one, the source's own
id (`original_id`: Claude Code's message id or line uuid, a Codex item id). A matched message
whose content grew (a reply still streaming, tool results still coming) is updated in place;
the rest is appended. Once a parsed message does not match (the agent rewound and took
another branch), everything after it is appended: history is never rewritten.

New compaction points of the agent (a Claude Code `compact_boundary`, a Codex `compacted`
line), recognised by their source id, are applied to the stored context as they arrive: the
live entries up to the compacted message are replaced by the summary and archived.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from compaction import SUMMARY_KEY, message_token_counts
from sessions_app.importers import ImportedCompaction, ImportedMessage, ImportedSession
from sessions_app.importers.builder import move_system_into_conversation
from sessions_app.importers.claude_code_records import latest_metadata
from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.compacting.archives import ArchivedEntry
from sessions_app.services.compacting.writeback import next_number
from sessions_app.services.importing.archive import write_archive
from sessions_app.services.importing.rows import (
    Span,
    anchors,
    compaction_key,
    compaction_row,
    message_row,
    stamp_times,
)
from sessions_app.services.sessions.entries import append_rows
from sessions_app.services.sessions.policies import default_profile, profile_encoding
from sessions_app.services.sessions.state import KEEP, Change, ReportedUsage, advance

__all__ = ["MergeResult", "merge_imported"]

#: Stored messages read per query while matching.
CHUNK: Final = 200

#: What a merge saves besides the counters `advance` changed.
_FIELDS: Final = ["next_seq", "next_position", "model", "title", "metadata"]


@dataclass(frozen=True)
class MergeResult:
    """What a merge changed, and the sequence number after the last parsed message."""

    added: int
    updated: int
    compactions: int
    end_seq: int

    @property
    def changed(self) -> bool:
        """True when anything was written."""
        return bool(self.added or self.updated or self.compactions)


def merge_imported(
    session: Session, imported: ImportedSession, *, start_seq: int = 0
) -> MergeResult:
    """Bring `session` up to date with `imported`, whose first message is stored at
    `start_seq` when it was stored before; one transaction, the session locked."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        result = _Merger(locked, imported, profile_encoding(default_profile())).run(start_seq)
    session.refresh_from_db()
    return result


class _Stored:
    """The stored messages from `start`, read in chunks as matching goes on."""

    def __init__(self, session: Session, start: int) -> None:
        self.session = session
        self.next = start
        self.rows: list[Message] = []

    def take(self) -> Message | None:
        if not self.rows:
            self.rows = list(
                Message.objects.filter(
                    session=self.session, seq__gte=self.next, seq__lt=self.next + CHUNK
                ).order_by("-seq")
            )
            if not self.rows or self.rows[-1].seq != self.next:
                self.rows = []
                return None
        row = self.rows.pop()
        self.next = row.seq + 1
        return row


class _Merger:
    """One merge: matches, updates and appends messages, applies new compactions."""

    def __init__(self, session: Session, imported: ImportedSession, encoding: str) -> None:
        self.session = session
        self.imported = imported
        self.encoding = encoding
        self.seqs: list[int] = []  # parsed message index -> stored seq
        self.pending: list[ImportedMessage] = []
        self.added = self.updated = self.compacted = 0
        self.added_tokens = self.rewritten_tokens = 0
        # The usage of the last assistant message added or changed (since the last new
        # compaction: one read before it describes the context before it).
        self.usage: ReportedUsage = KEEP
        # Read only when the part has compactions: a scan must not cost the whole session.
        self.known = _compaction_keys(session) if imported.compactions else set()
        self.last_time: datetime | None = None
        self.fallback = session.updated_at or timezone.now()  # the last activity known
        self.conversing = False
        self.start_seq = 0

    def run(self, start_seq: int) -> MergeResult:
        self.start_seq = start_seq
        self.places = self._places()
        stored: _Stored | None = _Stored(self.session, start_seq)
        arriving: dict[int, list[ImportedCompaction]] = defaultdict(list)
        for compaction in self.imported.compactions:
            arriving[compaction.at_message].append(compaction)
        conversing = Message.objects.filter(session=self.session, seq__lt=start_seq).exclude(
            role="system"
        )
        self.conversing = conversing.exists()
        for index, item in enumerate(self.imported.messages):
            for compaction in arriving.pop(index, []):
                self._compaction(compaction)
            self._place_system(item)
            row = stored.take() if stored is not None else None
            if row is not None and _same(row, item):
                self._update(row, item)
                self.seqs.append(row.seq)
                continue
            stored = None  # a different branch: the rest is new
            self._append(item)
        for at in sorted(arriving):  # after the last message
            for compaction in arriving[at]:
                self._compaction(compaction)
        self._flush()
        self._save()
        end = self.seqs[-1] + 1 if self.seqs else start_seq
        return MergeResult(self.added, self.updated, self.compacted, end)

    def _places(self) -> dict[int, str]:
        """Each compaction's anchor, by the seq its messages have when the part read matches
        what is stored (parsed message i is stored at start_seq + i)."""
        start = self.start_seq
        compactions = self.imported.compactions
        places = anchors(compactions, lambda index: start + index)
        return {id(c): a for c, a in zip(compactions, places, strict=True)}

    # messages ----------------------------------------------------------------------------

    def _place_system(self, item: ImportedMessage) -> None:
        """A system message after the conversation began becomes a marked user message, as
        the importers do (importers/builder.py); a part read alone cannot know it."""
        if item.role != "system":
            self.conversing = True
        elif self.conversing:
            move_system_into_conversation(item)

    def _update(self, row: Message, item: ImportedMessage) -> None:
        self._note(item)
        source_id = item.original_id[:200]
        if source_id and not row.original_id:  # a made-up tool result, now the real one
            Message.objects.filter(pk=row.pk).update(original_id=source_id)
        fresh = message_row(self.session, row.seq, item, 0, row.created_at)
        if _json(fresh.content) == _json(row.content) and _json(fresh.extra) == _json(row.extra):
            return
        if _regresses(row.content, fresh.content):
            return  # a file read again after it shrank: keep what was seen
        tokens = message_token_counts([item.message], self.encoding)[0]
        delta = tokens - row.token_count
        Message.objects.filter(pk=row.pk).update(
            content=fresh.content, extra=fresh.extra, token_count=tokens
        )
        ContextEntry.objects.filter(
            session=self.session, message_id=row.pk, content__isnull=True
        ).update(token_count=tokens)
        self.rewritten_tokens += delta
        self.updated += 1
        self._note_usage(item)

    def _append(self, item: ImportedMessage) -> None:
        self._note(item)
        self._note_usage(item)
        self.seqs.append(self.session.next_seq + len(self.pending))
        self.pending.append(item)
        if len(self.pending) >= CHUNK:
            self._flush()

    def _note(self, item: ImportedMessage) -> None:
        self.last_time = item.created_at or self.last_time

    def _note_usage(self, item: ImportedMessage) -> None:
        if item.usage and item.role == "assistant":
            self.usage = item.usage

    def _flush(self) -> None:
        if not self.pending:
            return
        session = self.session
        counts = message_token_counts([item.message for item in self.pending], self.encoding)
        rows = [
            message_row(
                session, session.next_seq + k, item, tokens, self.last_time or self.fallback
            )
            for k, (item, tokens) in enumerate(zip(self.pending, counts, strict=True))
        ]
        append_rows(session, rows)
        self.added += len(rows)
        self.added_tokens += sum(counts)
        self.pending = []

    # compactions -------------------------------------------------------------------------

    def _compaction(self, item: ImportedCompaction) -> None:
        anchor = self.places[id(item)]
        key = compaction_key(item.original_id, item.summary, anchor)
        if key in self.known:
            return
        self._flush()
        self.known.add(key)
        self.usage = KEEP
        session = self.session
        last = item.last_index
        # None: nothing of this part compacted, only what came before it.
        cut = self.seqs[last] if last is not None else self.start_seq - 1
        cut = min(cut, self._preserved_from(item) - 1)
        head, replaced = _split_context(session, cut)
        number = next_number(session)
        message = item.summary_message(number)
        tokens = message_token_counts([message], self.encoding)[0]
        head_tokens = sum(e.token_count for e in head)
        seqs = [e.message.seq for e in replaced if e.message is not None]
        seqs += [
            e.compaction.first_seq
            for e in replaced
            if e.compaction and e.compaction.first_seq is not None
        ]
        span = Span(
            first_seq=min(seqs) if seqs else None,
            last_seq=cut if cut >= 0 else None,
            positions=[e.position for e in replaced],
            tokens_before=head_tokens + sum(e.token_count for e in replaced),
            tokens_after=head_tokens + tokens,
            replaced=len(replaced),
            retained=len(head),
            anchor=anchor,
        )
        row = compaction_row(session, number, self.imported, item, span)
        row.archive.name = write_archive(
            session, row, (ArchivedEntry.of(e).to_dict() for e in replaced)
        )
        row.save(update_fields=["archive"])
        self._replace(row, replaced, message, tokens)
        self.compacted += 1

    def _preserved_from(self, item: ImportedCompaction) -> int:
        """The seq of the first message a Claude Code boundary kept after its summary when
        that message was read before this part (its `preservedSegment` head), else a big
        number."""
        metadata = item.raw.get("compactMetadata")
        segment = metadata.get("preservedSegment") if isinstance(metadata, dict) else None
        head = segment.get("headUuid") if isinstance(segment, dict) else None
        if not isinstance(head, str) or not head or self._read_here(head, item.at_message):
            return 1 << 62  # the importer placed it (item.last_index)
        recent = Message.objects.filter(session=self.session, seq__lt=self.start_seq)
        for seq, extra in recent.order_by("-seq").values_list("seq", "extra")[:CHUNK]:
            uuids = extra.get("import", {}).get("uuids", []) if isinstance(extra, dict) else []
            if head in uuids:
                return int(seq)
        return 1 << 62

    def _read_here(self, uuid: str, before: int) -> bool:
        """True when one of this part's first `before` messages has the line `uuid` (a uuid
        seen again: the newest line with it is meant, as the importer does)."""
        for item in self.imported.messages[:before]:
            uuids = item.extra.get("uuids")
            if isinstance(uuids, list) and uuid in uuids:
                return True
        return False

    def _replace(
        self, row: Compaction, replaced: list[ContextEntry], message: dict[str, Any], tokens: int
    ) -> None:
        """Put the summary of `row` in place of the entries it replaced."""
        session = self.session
        absorbed = [e.compaction_id for e in replaced if e.compaction_id is not None]
        Compaction.objects.filter(pk__in=absorbed).update(parent=row)
        ContextEntry.objects.filter(pk__in=[e.pk for e in replaced]).delete()
        if replaced:
            position = replaced[0].position
        else:
            position = session.next_position
            session.next_position += 1
        ContextEntry.objects.create(
            session=session,
            position=position,
            kind=ContextEntry.Kind.SUMMARY,
            compaction=row,
            role="user",
            content=message["content"],
            extra={SUMMARY_KEY: message[SUMMARY_KEY]},
            token_count=tokens,
        )

    # totals ------------------------------------------------------------------------------

    def _save(self) -> None:
        session, imported = self.session, self.imported
        if imported.model:
            session.model = imported.model[:128]
        if not session.title and imported.title:
            session.title = imported.title[:300]
        spawned = imported.metadata.get("spawned_agents")
        if isinstance(spawned, dict) and spawned:
            session.metadata = {
                **session.metadata,
                "spawned_agents": {**session.metadata.get("spawned_agents", {}), **spawned},
            }
        latest = latest_metadata(imported.metadata)  # cost, last prompt, ...: newest wins
        if latest:
            session.metadata = {**session.metadata, **latest}
        if not (self.added or self.updated or self.compacted):
            session.save(update_fields=["model", "title", "metadata"])
            return
        change = Change(
            appended=self.added,
            appended_tokens=self.added_tokens,
            rewritten_tokens=self.rewritten_tokens,
            entries_changed=bool(self.updated or self.compacted),  # contents changed in place
            usage=self.usage,
        )
        changes = advance(session, change)
        last = self.last_time or self.fallback  # saving puts the import time: auto_now
        session.save(update_fields=[*changes, *_FIELDS])
        stamp_times(session, None, last)


def _same(row: Message, item: ImportedMessage) -> bool:
    """True when the stored `row` is the parsed `item` (maybe grown since)."""
    if row.role != item.role:
        return False
    source_id = item.original_id[:200]
    return not row.original_id or not source_id or row.original_id == source_id


def _regresses(stored: Any, parsed: Any) -> bool:
    """True when `parsed` has fewer blocks, or more made-up tool results, than `stored`: a
    shorter read of the same message (the file was truncated), not a newer one."""
    old, new = _blocks(stored), _blocks(parsed)
    return len(new) < len(old) or _synthetic(new) > _synthetic(old)


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else [content]


def _synthetic(blocks: list[Any]) -> int:
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("ctxweb_synthetic"))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def _compaction_keys(session: Session) -> set[str]:
    rows = Compaction.objects.filter(session=session, trigger=Compaction.Trigger.IMPORTED)
    keys: set[str] = set()
    for details, summary, last in rows.values_list("details", "summary", "last_seq"):
        details = details if isinstance(details, dict) else {}
        key = details.get("source_key")
        if not isinstance(key, str):  # stored before keys were kept: its usual anchor
            anchor = f"{-1 if last is None else last}.0"
            key = compaction_key(str(details.get("source_id") or ""), summary, anchor)
        keys.add(key)
    return keys


def _split_context(session: Session, cut: int) -> tuple[list[ContextEntry], list[ContextEntry]]:
    """(leading system entries, entries a compaction up to message `cut` replaces)."""
    entries = list(
        ContextEntry.objects.filter(session=session)
        .select_related("message", "compaction")
        .order_by("position")
    )
    head = 0
    while (
        head < len(entries)
        and entries[head].kind == ContextEntry.Kind.MESSAGE
        and entries[head].role == "system"
    ):
        head += 1
    end = head
    while end < len(entries):
        entry = entries[end]
        if entry.kind == ContextEntry.Kind.MESSAGE and entry.message and entry.message.seq > cut:
            break
        end += 1
    return entries[:head], entries[head:end]
