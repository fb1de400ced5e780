"""Storing a newly imported transcript: an ImportedSession becomes Session, Message,
ContextEntry and Compaction rows, with the raw source archived beside them.

The agent's own compactions become Compaction rows (trigger `imported`) as if ctxweb had made
them: the context is replayed position by position (replay.py), so each imported compaction
has its range (`first_seq..last_seq`, `first_position..last_position`), a parent when a later
one summarized it again (nested markers), and an archive of the entries it replaced, in the
same format as ctxweb's own, so it can be reverted like one. A transcript stored before is
updated instead (merge.py).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.contrib.auth.models import AbstractBaseUser
from django.db import reset_queries, transaction
from django.utils import timezone

from compaction import SUMMARY_KEY, message_token_counts
from sessions_app.importers import ImportedSession
from sessions_app.importers.source import Progress, Source
from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.importing.archive import archive_source, write_archive
from sessions_app.services.importing.replay import Replaced, Replay, batches, head_end, replay
from sessions_app.services.importing.rows import (
    Span,
    anchors,
    compaction_row,
    message_row,
    metadata_of,
    stamp_times,
)
from sessions_app.services.sessions.policies import default_profile, profile_encoding
from sessions_app.services.sessions.state import KEEP, Change, advance
from sessions_app.storage import delete_stored_quietly
from sessions_app.unstorable import clean_text

__all__ = ["BATCH", "store_imported"]

#: Messages written (and token-counted) per batch.
BATCH: Final = 200


def store_imported(
    owner: AbstractBaseUser,
    imported: ImportedSession,
    *,
    raw: Source | None = None,
    title: str | None = None,
    progress: Progress | None = None,
    parent: Session | None = None,
) -> list[Session]:
    """Store `imported` and its subagents in one transaction; the main session comes first.

    `raw` is the opened input, archived as the main session's raw source; subagents read
    from files of their own archive those files. `parent`: the session `imported` is a
    subagent of (a subagent transcript that appeared after its parent was stored).
    """
    encoding = profile_encoding(default_profile())
    saved_files: list[str] = []
    sessions: list[Session] = []
    above = (parent, ImportedSession(parent.source_format)) if parent is not None else None
    try:
        with transaction.atomic():
            _store_tree(
                _Tree(owner, encoding, sessions, saved_files, progress), imported, above, raw, title
            )
    except BaseException:
        for name in saved_files:
            delete_stored_quietly(name)
        raise
    return sessions


@dataclass
class _Tree:
    """What every session of one stored tree shares."""

    owner: AbstractBaseUser
    encoding: str
    sessions: list[Session]
    saved_files: list[str]
    progress: Progress | None


def _store_tree(
    tree: _Tree,
    imported: ImportedSession,
    parent: tuple[Session, ImportedSession] | None,
    raw: Source | None,
    title: str | None,
) -> None:
    writer = _SessionWriter(tree.owner, imported, tree.encoding, tree.progress)
    session = writer.write(parent[0] if parent else None, title)
    tree.sessions.append(session)
    archive_source(session, imported, parent, raw, tree.saved_files)
    if imported.source_path and (parent is None or imported.source_path != parent[1].source_path):
        session.source_path = clean_text(imported.source_path)[:1024]
        session.save(update_fields=["source_path"])
    stamp_times(session, writer.first_time, writer.last_time)
    for child in imported.subagents:
        _store_tree(tree, child, (session, imported), None, None)


# -- one session ---------------------------------------------------------------------------


class _SessionWriter:
    """Writes one ImportedSession's rows, keeping only integers per message in memory."""

    def __init__(
        self,
        owner: AbstractBaseUser,
        imported: ImportedSession,
        encoding: str,
        progress: Progress | None,
    ) -> None:
        self.owner: Any = owner  # the project's user model
        self.imported = imported
        self.encoding = encoding
        self.progress = progress
        count = len(imported.messages)
        self.message_pks = array("q", bytes(8 * count))
        self.tokens = array("q", bytes(8 * count))
        self.positions = array("q", bytes(8 * count))
        self.head_end = head_end(imported)
        self.usage: dict[str, Any] | None = None  # of the last assistant message with one
        self.first_time: datetime | None = None
        self.last_time: datetime | None = None

    def write(self, parent: Session | None, title: str | None) -> Session:
        imported = self.imported
        session = Session.objects.create(
            owner=self.owner,
            title=clean_text(title or imported.title or imported.source_name)[:300],
            source_format=imported.source_format,
            external_id=clean_text(imported.external_id)[:200],
            model=clean_text(imported.model)[:128],
            parent=parent,
            parent_tool_use_id=clean_text(imported.parent_tool_use_id)[:200],
            metadata=metadata_of(imported),
        )
        self._messages(session)
        plan = replay(imported, self.head_end)
        summary_tokens = self._summary_tokens()
        rows = self._compactions(session, plan, summary_tokens)
        self._context(session, plan, rows, summary_tokens)
        self._totals(session, plan)
        return session

    # messages ----------------------------------------------------------------------------

    def _messages(self, session: Session) -> None:
        fallback = timezone.now()
        last_time: datetime | None = None
        total = len(self.imported.messages)
        for start, batch in batches(self.imported.messages, BATCH):
            dicts = [item.message for item in batch]
            counts = message_token_counts(dicts, self.encoding)
            rows = []
            for offset, (item, tokens) in enumerate(zip(batch, counts, strict=True)):
                seq = start + offset
                last_time = item.created_at or last_time
                self.first_time = self.first_time or item.created_at
                if item.usage and item.role == "assistant":
                    self.usage = item.usage
                rows.append(message_row(session, seq, item, tokens, last_time or fallback))
                self.tokens[seq] = tokens
            Message.objects.bulk_create(rows)
            for offset, row in enumerate(rows):
                self.message_pks[start + offset] = row.pk
            reset_queries()  # with DEBUG on, Django would keep every (large) insert
            if self.progress is not None:
                self.progress("store", start + len(batch), total)
        self.last_time = last_time

    def _summary_tokens(self) -> list[int]:
        compactions = self.imported.compactions
        if not compactions:
            return []
        messages = [c.summary_message(i + 1) for i, c in enumerate(compactions)]
        return message_token_counts(messages, self.encoding)

    # compactions -------------------------------------------------------------------------

    def _compactions(
        self, session: Session, plan: Replay, summary_tokens: list[int]
    ) -> list[Compaction]:
        head_tokens = sum(self.tokens[: self.head_end])
        places = anchors(self.imported.compactions, lambda index: index)
        rows: list[Compaction] = []
        for index, imported in enumerate(self.imported.compactions):
            replaced = plan.replaced[index]
            positions = [p for p, _, _ in replaced]
            before = head_tokens + sum(
                self._entry_tokens(ref, summary_tokens) for _, ref, _ in replaced
            )
            after = head_tokens + summary_tokens[index]
            span = Span(
                first_seq=imported.first_index,
                last_seq=imported.last_index,
                positions=positions,
                tokens_before=before,
                tokens_after=after,
                replaced=len(replaced),
                retained=self.head_end,
                anchor=places[index],
            )
            row = compaction_row(session, index + 1, self.imported, imported, span)
            row.archive.name = self._archive(session, row, replaced, rows, summary_tokens)
            row.save(update_fields=["archive"])
            rows.append(row)
        for index, imported in enumerate(self.imported.compactions):
            if imported.absorbed_by is not None:
                rows[index].parent = rows[imported.absorbed_by]
                rows[index].save(update_fields=["parent"])
        return rows

    def _entry_tokens(self, ref: tuple[str, int], summary_tokens: list[int]) -> int:
        kind, index = ref
        return summary_tokens[index] if kind == "summary" else self.tokens[index]

    def _archive(
        self,
        session: Session,
        row: Compaction,
        replaced: list[Replaced],
        earlier: list[Compaction],
        summary_tokens: list[int],
    ) -> str:
        """The replaced entries in ctxweb's archive format, written as a stream."""
        entries = (
            self._entry_snapshot(position, ref, earlier, summary_tokens)
            for position, ref, _ in replaced
        )
        return write_archive(session, row, entries)

    def _entry_snapshot(
        self,
        position: int,
        ref: tuple[str, int],
        earlier: list[Compaction],
        summary_tokens: list[int],
    ) -> dict[str, Any]:
        kind, index = ref
        if kind == "summary":
            message = self.imported.compactions[index].summary_message(index + 1)
            return {
                "id": None,
                "position": position,
                "kind": ContextEntry.Kind.SUMMARY,
                "message_id": None,
                "seq": None,
                "compaction_id": earlier[index].pk,
                "role": "user",
                "content": message["content"],
                "extra": {SUMMARY_KEY: message[SUMMARY_KEY]},
                "token_count": summary_tokens[index],
                "message": message,
            }
        item = self.imported.messages[index]
        return {
            "id": None,
            "position": position,
            "kind": ContextEntry.Kind.MESSAGE,
            "message_id": self.message_pks[index],
            "seq": index,
            "compaction_id": None,
            "role": item.role,
            "content": None,
            "extra": {},
            "token_count": self.tokens[index],
            "message": item.message,
        }

    # context and totals --------------------------------------------------------------------

    def _context(
        self,
        session: Session,
        plan: Replay,
        rows: list[Compaction],
        summary_tokens: list[int],
    ) -> None:
        entries: list[ContextEntry] = []
        for item in self.imported.context:
            if item.kind == "summary":
                compaction = self.imported.compactions[item.index]
                message = compaction.summary_message(item.index + 1)
                entries.append(
                    ContextEntry(
                        session=session,
                        position=plan.summary_positions[item.index],
                        kind=ContextEntry.Kind.SUMMARY,
                        compaction=rows[item.index],
                        role="user",
                        content=message["content"],
                        extra={SUMMARY_KEY: message[SUMMARY_KEY]},
                        token_count=summary_tokens[item.index],
                    )
                )
            else:
                entries.append(
                    ContextEntry(
                        session=session,
                        position=plan.message_positions[item.index],
                        kind=ContextEntry.Kind.MESSAGE,
                        message_id=self.message_pks[item.index],
                        role=self.imported.messages[item.index].role,
                        token_count=self.tokens[item.index],
                    )
                )
            if len(entries) >= BATCH:
                ContextEntry.objects.bulk_create(entries)
                entries = []
                reset_queries()
        ContextEntry.objects.bulk_create(entries)

    def _totals(self, session: Session, plan: Replay) -> None:
        """The new session's counters (services/sessions/state.py): its first version."""
        session.next_seq = len(self.imported.messages)
        session.next_position = plan.next_position
        written = Change(
            appended=len(self.imported.messages),
            appended_tokens=sum(self.tokens),
            entries_changed=True,  # its context holds the imported compactions' summaries
            usage=KEEP if self.usage is None else self.usage,
        )
        advance(session, written)
        session.save()
