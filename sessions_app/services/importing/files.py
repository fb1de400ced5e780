"""Importing one transcript: parse it, then store it as a new session or, when the same
transcript was imported before, update that session (merge.py).

A session remembers its source: its format, the source's own session id (`external_id`) and,
for a file, its path (`source_path`). The same owner importing a transcript with the same
format and id (or, without an id, the same file) updates the session stored before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from django.contrib.auth.models import AbstractBaseUser

from sessions_app.importers import ImportedSession, SkippedLine, TranscriptError, UnknownFormatError
from sessions_app.importers.claude_code import CONTINUES
from sessions_app.importers.parse import parse_source
from sessions_app.importers.source import Progress, open_source
from sessions_app.models import Message, Session
from sessions_app.services.errors import InvalidInput
from sessions_app.services.importing.binary import HEAD_BYTES, binary_problem
from sessions_app.services.importing.merge import MergeResult, merge_imported
from sessions_app.services.importing.proxied import is_proxied, not_held_by_proxy
from sessions_app.services.importing.store import store_imported
from sessions_app.unstorable import clean_text

#: Newest messages of a stored subagent searched for the line a later part goes on from.
LOOKBACK: Final = 200

__all__ = [
    "ImportReport",
    "find_source_session",
    "import_file",
    "merge_tree",
    "resolved",
    "source_identity",
    "update_session",
]


@dataclass
class ImportReport:
    """What one import stored: the main session, all sessions, and the source's accounting.

    `created` is false when the transcript was imported before and its session was updated
    (`new_messages` then counts the messages added).
    """

    session: Session
    sessions: list[Session]
    source_name: str
    source_format: str
    counts: dict[str, int]
    skipped: list[SkippedLine] = field(default_factory=list)
    skipped_count: int = 0
    kept_raw: int = 0
    created: bool = True
    new_messages: int = 0

    def summary_line(self) -> str:
        """One line for a person: what was imported and what was not."""
        counts = self.counts
        update = "" if self.created else f" (updated: {self.new_messages} new messages)"
        return (
            f"{self.source_name or 'input'}: {self.source_format}, "
            f"{counts['messages']} messages, {counts['tool_calls']} tool calls, "
            f"{counts['compactions']} compactions, {len(self.sessions) - 1} subagent sessions, "
            f"{self.skipped_count} lines skipped, {self.kept_raw} kept raw -> {self.session.pk}"
            f"{update}"
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
            "created": self.created,
            "new_messages": self.new_messages,
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
    field: str = "file",
) -> ImportReport:
    """Parse and store one transcript (path, upload, file object or bytes) for `owner`.

    Raises InvalidInput naming `field` (the input) when it cannot be read at all or holds no
    message, or naming `format` when that format is unknown; nothing is stored then. Corrupt
    lines are skipped and reported. As in the transcript itself (sessions_app/importers/
    source.py), NUL characters and lone surrogates in `title` and `name` are cleaned.
    """
    try:
        return _import(
            owner, source, format, clean_text(title) if title else title, name, subagents, progress
        )
    except UnknownFormatError as error:
        raise InvalidInput.field("format" if format else field, str(error)) from error
    except TranscriptError as error:
        raise InvalidInput.field(field, str(error)) from error


def _import(
    owner: AbstractBaseUser,
    source: Any,
    format: str | None,
    title: str | None,
    name: str,
    subagents: bool,
    progress: Progress | None,
) -> ImportReport:
    with open_source(source, name=clean_text(name)) as opened:
        opened.progress = progress
        binary = binary_problem(opened.head(HEAD_BYTES))
        if binary is not None:  # before any format reads it as lines it would skip
            raise TranscriptError(binary)
        imported = parse_source(opened, format, subagents=subagents)
        try:
            if not imported.messages and not imported.compactions and not imported.subagents:
                raise TranscriptError(
                    f"no messages found in {imported.source_name or 'the input'} "
                    f"({imported.source_format}: {imported.skipped_count} lines skipped, "
                    f"{imported.kept_raw} kept raw)"
                )
            imported.external_id = source_identity(imported)
            if opened.path is not None:
                imported.source_path = resolved(opened.path)
            existing = find_source_session(owner, imported)
            if existing is None:
                sessions = store_imported(
                    owner, imported, raw=opened, title=title, progress=progress
                )
                return _report(imported, sessions, created=True, added=0)
            added = update_session(existing, imported)
            return _report(
                imported, [existing, *_descendants(existing)], created=False, added=added
            )
        finally:
            imported.close()


def source_identity(imported: ImportedSession) -> str:
    """The source's own id of the session: a Claude Code subagent transcript read on its own
    is named by its agent id (its lines carry the parent's session id)."""
    agent = imported.metadata.get("agent_id")
    if (
        imported.source_format == "claude_code"
        and isinstance(agent, str)
        and agent
        and imported.external_id == imported.metadata.get("session_id")
    ):
        return agent
    return imported.external_id


def find_source_session(owner: AbstractBaseUser, imported: ImportedSession) -> Session | None:
    """The session of `owner` stored before from the same transcript, if any."""
    sessions = Session.objects.filter(owner_id=owner.pk, source_format=imported.source_format)
    if imported.external_id:
        sessions = sessions.filter(external_id=clean_text(imported.external_id)[:200])
    elif imported.source_path:
        sessions = sessions.filter(source_path=clean_text(imported.source_path)[:1024])
    else:
        return None
    # the proxied one first: a transcript of a proxied conversation is read into it (proxied.py)
    proxied = sessions.exclude(proxy_key="").order_by("created_at", "pk").first()
    return proxied or sessions.order_by("created_at", "pk").first()


def update_session(session: Session, imported: ImportedSession, *, start_seq: int = 0) -> int:
    """Merge `imported` (and its subagents) into `session`; returns the messages added."""
    return merge_tree(session, imported, start_seq=start_seq).added


def merge_tree(session: Session, imported: ImportedSession, *, start_seq: int = 0) -> MergeResult:
    """Merge `imported` into `session` and each of its subagents into its stored child (one
    not stored yet is stored now). The counts add up the rows written in every session of
    the tree; `end_seq` is the main session's. A session the proxy records too gets only
    what the proxy does not hold, after its last message (proxied.py)."""
    if is_proxied(session):
        imported, start_seq = not_held_by_proxy(session, imported), session.next_seq
    result = merge_imported(session, imported, start_seq=start_seq)
    if imported.source_path and not session.source_path:
        session.source_path = clean_text(imported.source_path)[:1024]
        session.save(update_fields=["source_path"])
    added, updated, compactions = result.added, result.updated, result.compactions
    for child in imported.subagents:
        each = _update_child(session, imported, child)
        added += each.added
        updated += each.updated
        compactions += each.compactions
    return MergeResult(added, updated, compactions, result.end_seq)


def _update_child(
    parent: Session, imported: ImportedSession, child: ImportedSession
) -> MergeResult:
    stored = _stored_child(parent, child)
    if stored is None:
        sessions = store_imported(parent.owner, child, parent=parent)
        return MergeResult(
            sum(each.message_count for each in sessions),
            0,
            sum(each.compaction_count for each in sessions),
            len(child.messages),
        )
    if child.parent_tool_use_id and not stored.parent_tool_use_id:
        stored.parent_tool_use_id = clean_text(child.parent_tool_use_id)[:200]
        stored.save(update_fields=["parent_tool_use_id"])
    own_file = bool(child.source_path) and child.source_path != imported.source_path
    return merge_tree(stored, child, start_seq=0 if own_file else _start_of(stored, child))


def _stored_child(parent: Session, child: ImportedSession) -> Session | None:
    """The stored subagent of `parent` that `child` is (maybe a later part of): the one
    holding the line it goes on from, else the one with its id (agent id or first line's
    uuid), else the one its Task call started."""
    siblings = Session.objects.filter(parent=parent).order_by("created_at", "pk")
    continues = child.metadata.pop(CONTINUES, None)
    if isinstance(continues, str) and continues:
        for sibling in siblings:
            if _holds_line(sibling, continues):
                return sibling
    for field_name, value in (
        ("external_id", child.external_id),
        ("parent_tool_use_id", child.parent_tool_use_id),
    ):
        if value:
            found = siblings.filter(**{field_name: clean_text(value)[:200]}).first()
            if found is not None:
                return found
    return None


def _holds_line(session: Session, uuid: str) -> bool:
    """True when one of the newest messages of `session` was read from the line `uuid`."""
    recent = Message.objects.filter(session=session).order_by("-seq")
    for original_id, extra in recent.values_list("original_id", "extra")[:LOOKBACK]:
        uuids = extra.get("import", {}).get("uuids", []) if isinstance(extra, dict) else []
        if original_id == uuid or uuid in uuids:
            return True
    return False


def _start_of(stored: Session, child: ImportedSession) -> int:
    """Where a partly read inline subagent's messages start among the stored ones."""
    first = child.messages[0].original_id[:200] if child.messages else ""
    if not first:
        return 0
    seq = stored.messages.filter(original_id=first).values_list("seq", flat=True).first()
    return stored.next_seq if seq is None else int(seq)


def _descendants(session: Session) -> list[Session]:
    found: list[Session] = []
    for child in Session.objects.filter(parent=session).order_by("created_at", "pk"):
        found.append(child)
        found.extend(_descendants(child))
    return found


def _report(
    imported: ImportedSession, sessions: list[Session], *, created: bool, added: int
) -> ImportReport:
    return ImportReport(
        session=sessions[0],
        sessions=sessions,
        source_name=imported.source_name,
        source_format=imported.source_format,
        counts=imported.counts(),
        skipped=list(imported.skipped),
        skipped_count=imported.skipped_count,
        kept_raw=imported.kept_raw,
        created=created,
        new_messages=added,
    )


def resolved(path: str | Path) -> str:
    """The absolute form of a transcript path, as `source_path` stores it."""
    return str(Path(path).expanduser().resolve())
