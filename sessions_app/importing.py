"""Storing imported transcripts: an ImportedSession becomes Session, Message, ContextEntry and
Compaction rows, with the raw source archived beside them.

`import_file(owner, source)` parses a path, an upload or bytes and stores the session with
its subagent sessions (linked by `parent` and `parent_tool_use_id`) in one transaction.

The agent's own compactions become Compaction rows (trigger `imported`) as if ctxweb had made
them: the context is replayed position by position, so each imported compaction has its
range (`first_seq..last_seq`, `first_position..last_position`), a parent when a later one
summarized it again (nested markers), and an archive of the entries it replaced, in the
same format as ctxweb's own, so it can be reverted like one.
"""

from __future__ import annotations

import json
import os
import tempfile
from array import array
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Final

from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import reset_queries, transaction
from django.db.models import Sum
from django.utils import timezone

from compaction import SUMMARY_KEY, archive_name, message_token_counts

from .importers import ImportedSession, SkippedLine, TranscriptError
from .importers.parse import parse_source
from .importers.source import Progress, Source, open_source
from .models import Compaction, ContextEntry, Message, Session
from .services.policies import default_profile
from .services.writeback import ARCHIVE_PREFIX
from .storage import delete_stored_quietly
from .unstorable import clean, clean_text

__all__ = ["ImportReport", "import_file", "store_imported"]

#: Messages written (and token-counted) per batch.
BATCH: Final = 200
#: Longest file name (characters) of an archived raw source.
RAW_NAME_CHARS: Final = 40
#: Key of Message.extra holding what the importer learned about a message (source ids,
#: tool results' raw data, blocks kept aside, repairs made).
IMPORT_KEY: Final = "import"


@dataclass
class ImportReport:
    """What one import stored: the main session, all sessions, and the source's accounting."""

    session: Session
    sessions: list[Session]
    source_name: str
    source_format: str
    counts: dict[str, int]
    skipped: list[SkippedLine] = field(default_factory=list)
    skipped_count: int = 0
    kept_raw: int = 0

    def summary_line(self) -> str:
        """One line for a person: what was imported and what was not."""
        counts = self.counts
        return (
            f"{self.source_name or 'input'}: {self.source_format}, "
            f"{counts['messages']} messages, {counts['tool_calls']} tool calls, "
            f"{counts['compactions']} compactions, {len(self.sessions) - 1} subagent sessions, "
            f"{self.skipped_count} lines skipped, {self.kept_raw} kept raw -> {self.session.pk}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (session ids as strings)."""
        return {
            "session_id": str(self.session.pk),
            "session_ids": [str(s.pk) for s in self.sessions],
            "source_name": self.source_name,
            "source_format": self.source_format,
            "counts": dict(self.counts),
            "skipped": [{"line": s.line, "reason": s.reason} for s in self.skipped],
            "skipped_count": self.skipped_count,
            "kept_raw": self.kept_raw,
        }


def import_file(
    owner: AbstractBaseUser,
    source: Any,
    *,
    format: str | None = None,
    title: str | None = None,
    name: str = "",
    subagents: bool = True,
    progress: Progress | None = None,
) -> ImportReport:
    """Parse and store one transcript (path, upload, file object or bytes) for `owner`.

    Raises `sessions_app.importers.TranscriptError` when the input cannot be read at all or
    holds no message; nothing is stored then. Corrupt lines are skipped and reported. As
    in the transcript itself (sessions_app/importers/source.py), NUL characters and lone
    surrogates in `title` and `name` (a file name undecodable as UTF-8 has them) are
    cleaned, not refused.
    """
    title = clean_text(title) if title else title
    with open_source(source, name=clean_text(name)) as opened:
        opened.progress = progress
        imported = parse_source(opened, format, subagents=subagents)
        try:
            if not imported.messages and not imported.compactions and not imported.subagents:
                raise TranscriptError(
                    f"no messages found in {imported.source_name or 'the input'} "
                    f"({imported.source_format}: {imported.skipped_count} lines skipped, "
                    f"{imported.kept_raw} kept raw)"
                )
            sessions = store_imported(owner, imported, raw=opened, title=title, progress=progress)
            return ImportReport(
                session=sessions[0],
                sessions=sessions,
                source_name=imported.source_name,
                source_format=imported.source_format,
                counts=imported.counts(),
                skipped=list(imported.skipped),
                skipped_count=imported.skipped_count,
                kept_raw=imported.kept_raw,
            )
        finally:
            imported.close()


def store_imported(
    owner: AbstractBaseUser,
    imported: ImportedSession,
    *,
    raw: Source | None = None,
    title: str | None = None,
    progress: Progress | None = None,
) -> list[Session]:
    """Store `imported` and its subagents in one transaction; the main session comes first.

    `raw` is the opened input, archived as the main session's raw source; subagents read
    from files of their own archive those files.
    """
    encoding = default_profile().encoding
    saved_files: list[str] = []
    sessions: list[Session] = []
    try:
        with transaction.atomic():
            _store_tree(
                owner, imported, None, raw, title, encoding, sessions, saved_files, progress
            )
    except BaseException:
        for name in saved_files:
            delete_stored_quietly(name)
        raise
    return sessions


def _store_tree(
    owner: AbstractBaseUser,
    imported: ImportedSession,
    parent: tuple[Session, ImportedSession] | None,
    raw: Source | None,
    title: str | None,
    encoding: str,
    sessions: list[Session],
    saved_files: list[str],
    progress: Progress | None,
) -> None:
    session = _SessionWriter(owner, imported, encoding, progress).write(
        parent[0] if parent else None, title
    )
    sessions.append(session)
    _archive_source(session, imported, parent, raw, saved_files)
    for child in imported.subagents:
        _store_tree(
            owner, child, (session, imported), None, None, encoding, sessions, saved_files, progress
        )


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
        self.head_end = _head_end(imported)
        self.last_usage: dict[str, Any] | None = None

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
            metadata=_metadata(imported),
        )
        self._messages(session)
        plan = _replay(imported, self.head_end)
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
        for start, batch in _batches(self.imported.messages, BATCH):
            dicts = [item.message for item in batch]
            counts = message_token_counts(dicts, self.encoding)
            rows = []
            for offset, (item, tokens) in enumerate(zip(batch, counts, strict=True)):
                seq = start + offset
                last_time = item.created_at or last_time
                extra = {k: v for k, v in item.message.items() if k not in {"role", "content"}}
                if item.usage:
                    extra["usage"] = item.usage
                    if item.role == "assistant":
                        self.last_usage = item.usage
                if item.extra:
                    extra[IMPORT_KEY] = item.extra
                rows.append(
                    Message(
                        session=session,
                        seq=seq,
                        role=item.role,
                        content=item.message["content"],
                        extra=extra,
                        token_count=tokens,
                        original_id=item.original_id[:200],
                        created_at=item.created_at or last_time or fallback,
                    )
                )
                self.tokens[seq] = tokens
            Message.objects.bulk_create(rows)
            for offset, row in enumerate(rows):
                self.message_pks[start + offset] = row.pk
            reset_queries()  # with DEBUG on, Django would keep every (large) insert
            if self.progress is not None:
                self.progress("store", start + len(batch), total)

    def _summary_tokens(self) -> list[int]:
        compactions = self.imported.compactions
        if not compactions:
            return []
        messages = [c.summary_message(i + 1) for i, c in enumerate(compactions)]
        return message_token_counts(messages, self.encoding)

    # compactions -------------------------------------------------------------------------

    def _compactions(
        self, session: Session, plan: _Replay, summary_tokens: list[int]
    ) -> list[Compaction]:
        head_tokens = sum(self.tokens[: self.head_end])
        rows: list[Compaction] = []
        for index, imported in enumerate(self.imported.compactions):
            replaced = plan.replaced[index]
            positions = [p for p, _, _ in replaced]
            before = head_tokens + sum(
                self._entry_tokens(ref, summary_tokens) for _, ref, _ in replaced
            )
            after = head_tokens + summary_tokens[index]
            row = Compaction.objects.create(
                session=session,
                number=index + 1,
                created_at=imported.created_at or timezone.now(),
                trigger=Compaction.Trigger.IMPORTED,
                strategy="imported",
                summarizer=f"{self.imported.source_format} (imported)"[:128],
                model=self.imported.model[:128],
                first_seq=imported.first_index,
                last_seq=imported.last_index,
                first_position=min(positions) if positions else None,
                last_position=max(positions) if positions else None,
                summary=imported.summary,
                tokens_before=before,
                tokens_after=after,
                messages_before=self.head_end + len(replaced),
                messages_after=self.head_end + 1,
                compacted_message_count=len(replaced),
                retained_message_count=self.head_end,
                ratio=round(after / before, 6) if before else None,
                status=Compaction.Status.SUCCEEDED,
                details=_details(self.imported, imported),
            )
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
        replaced: list[tuple[int, tuple[str, int], int]],
        earlier: list[Compaction],
        summary_tokens: list[int],
    ) -> str:
        """The replaced entries in ctxweb's archive format, written as a stream."""
        with tempfile.TemporaryFile() as spool:
            header = {
                "session": str(session.pk),
                "compaction": row.number,
                "created_at": row.created_at.isoformat(),
                "trigger": row.trigger,
                "imported": True,
            }
            spool.write(json.dumps(header, ensure_ascii=False)[:-1].encode() + b', "entries": [')
            for number, (position, ref, _) in enumerate(replaced):
                if number:
                    spool.write(b",\n")
                entry = self._entry_snapshot(position, ref, earlier, summary_tokens)
                spool.write(json.dumps(entry, ensure_ascii=False, default=str).encode())
            spool.write(b'], "transformed": []}')
            spool.seek(0)
            name = f"{ARCHIVE_PREFIX}/{archive_name(str(session.pk), row.created_at, row.number)}"
            return str(default_storage.save(name, File(spool)))

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
        plan: _Replay,
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

    def _totals(self, session: Session, plan: _Replay) -> None:
        tokens = ContextEntry.objects.filter(session=session).aggregate(total=Sum("token_count"))
        session.message_count = len(self.imported.messages)
        session.next_seq = len(self.imported.messages)
        session.next_position = plan.next_position
        session.history_tokens = sum(self.tokens)
        session.context_tokens = int(tokens["total"] or 0)
        session.context_entry_count = len(self.imported.context)
        session.compaction_count = len(self.imported.compactions)
        session.last_usage = self.last_usage
        session.version = 1
        session.save()


# -- positions: replaying the context's history ----------------------------------------------


@dataclass
class _Replay:
    """Where every entry sat in the context over time, as ctxweb would have placed it."""

    message_positions: array[int]
    summary_positions: list[int]
    #: Per compaction: the entries it replaced, as (position, (kind, index), seq or -1).
    replaced: list[list[tuple[int, tuple[str, int], int]]]
    next_position: int


def _replay(imported: ImportedSession, head_end: int) -> _Replay:
    """Where entries sat as the context grew and was compacted.

    Message `seq` sits at position 2*seq+1; a compaction's summary takes the first position
    it freed, or, when it replaced nothing, the even position just before what it kept.
    """
    compactions = imported.compactions
    after: dict[int, list[int]] = defaultdict(list)
    for index, compaction in enumerate(compactions):
        after[max(compaction.at_message, head_end) - 1].append(index)
    count = len(imported.messages)
    positions = array("q", (2 * seq + 1 for seq in range(count)))
    summary_positions = [0] * len(compactions)
    replaced: list[list[tuple[int, tuple[str, int], int]]] = [[] for _ in compactions]
    live: list[tuple[int, tuple[str, int], int]] = []
    for seq in range(-1, count):
        if seq >= head_end:
            live.append((positions[seq], ("message", seq), seq))
        for index in after.get(seq, []):
            last = compactions[index].last_index
            cut = -1 if last is None else last
            gone = [entry for entry in live if entry[2] <= cut]
            kept = [entry for entry in live if entry[2] > cut]
            replaced[index] = gone
            position = _summary_position(gone, kept, seq)
            summary_positions[index] = position
            live = [(position, ("summary", index), -1), *kept]
    return _Replay(positions, summary_positions, replaced, 2 * count + 1)


def _summary_position(
    gone: list[tuple[int, tuple[str, int], int]],
    kept: list[tuple[int, tuple[str, int], int]],
    seq: int,
) -> int:
    """The first freed position; with nothing replaced, the even one before what was kept."""
    if gone:
        return gone[0][0]
    return kept[0][0] - 1 if kept else 2 * (seq + 1)


# -- helpers -----------------------------------------------------------------------------------


def _head_end(imported: ImportedSession) -> int:
    """How many leading system messages the session has."""
    count = 0
    for item in imported.messages:
        if item.role != "system":
            break
        count += 1
    return count


def _batches(items: Sequence[Any], size: int) -> Iterator[tuple[int, list[Any]]]:
    batch: list[Any] = []
    start = 0
    for index, item in enumerate(items):
        if not batch:
            start = index
        batch.append(item)
        if len(batch) >= size:
            yield start, batch
            batch = []
    if batch:
        yield start, batch


def _metadata(imported: ImportedSession) -> dict[str, Any]:
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


def _details(imported: ImportedSession, compaction: Any) -> dict[str, Any]:
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


def _archive_source(
    session: Session,
    imported: ImportedSession,
    parent: tuple[Session, ImportedSession] | None,
    raw: Source | None,
    saved_files: list[str],
) -> None:
    """Keep the bytes the session came from with it (shared with the parent when inline)."""
    path = Path(imported.source_path) if imported.source_path else None
    own_file = path is not None and (
        parent is None or imported.source_path != parent[1].source_path
    )
    if raw is not None:
        raw.rewind()
        name = _save_raw(session, raw.name or imported.source_name or "transcript", raw.file)
    elif own_file and path is not None and path.is_file():
        with open(path, "rb") as handle:
            name = _save_raw(session, path.name, handle)
    elif parent is not None and parent[0].raw_source:
        session.raw_source.name = parent[0].raw_source.name
        session.save(update_fields=["raw_source"])
        return
    else:
        return
    saved_files.append(name)
    session.raw_source.name = name
    session.save(update_fields=["raw_source"])


def _save_raw(session: Session, filename: str, file: IO[bytes]) -> str:
    safe = _short_name(clean_text(os.path.basename(filename.replace("\\", "/"))))
    field = Session._meta.get_field("raw_source")
    stored = default_storage.save(
        f"sources/{session.pk}/{safe}", File(file), max_length=field.max_length
    )
    return str(stored)


def _short_name(name: str) -> str:
    """`name` cut to RAW_NAME_CHARS characters, its extension kept: the storage name must fit
    the file field (100 characters) and the file system (255 bytes per name)."""
    name = name.strip() or "transcript"
    if len(name) <= RAW_NAME_CHARS:
        return name
    stem, ext = os.path.splitext(name)
    ext = ext[:16]
    return stem[: RAW_NAME_CHARS - len(ext)] + ext
