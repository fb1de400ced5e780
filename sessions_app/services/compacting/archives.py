"""Compaction archives: the exact entries a compaction replaced, as one typed document.

The one owner of the format. A compaction (services/compacting/writeback.py) and an import
(sessions_app/importing.py) write archives with `write_archive`; a revert
(services/compacting/reverting.py), the compaction log and the API read them with `read_archive`.
On disk an archive is a JSON object in the default storage under `archives/`:

    {"version": 1, "session": "<uuid>", "compaction": 3, "created_at": "<iso>",
     "trigger": "auto", "imported": false, "entries": [...], "transformed": [...]}

each entry in the stored form of a ContextEntry (`ArchivedEntry`). Archives written before
the format had a version (no `version` key, `imported` only on imported ones) are read as
version 0 with the same fields.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

from django.core.files import File
from django.core.files.storage import default_storage

from compaction import archive_name
from sessions_app.models import Compaction, ContextEntry
from sessions_app.services.errors import Unavailable
from sessions_app.services.sessions.entries import entry_message
from sessions_app.storage import save_new

__all__ = [
    "ARCHIVE_PREFIX",
    "ARCHIVE_VERSION",
    "Archive",
    "ArchiveHeader",
    "ArchiveUnavailable",
    "ArchivedEntry",
    "read_archive",
    "write_archive",
]

#: Folder of compaction archives in the default storage.
ARCHIVE_PREFIX: Final = "archives"
#: Version written in new archives (0: the unversioned documents written before).
ARCHIVE_VERSION: Final = 1


class ArchiveUnavailable(Unavailable):
    """An archive could not be written or read (storage failure, or not an archive)."""


@dataclass(frozen=True, slots=True)
class ArchivedEntry:
    """One context entry exactly as stored: what a revert puts back."""

    id: int | None
    position: int
    kind: str
    message_id: int | None
    seq: int | None
    compaction_id: int | None
    role: str
    content: Any
    extra: dict[str, Any]
    token_count: int
    #: The engine message the entry stood for (content and extras resolved).
    message: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, entry: ContextEntry) -> ArchivedEntry:
        """The archived form of a stored entry (its message row loaded)."""
        return cls(
            id=entry.pk,
            position=entry.position,
            kind=entry.kind,
            message_id=entry.message_id,
            seq=entry.message.seq if entry.message is not None else None,
            compaction_id=entry.compaction_id,
            role=entry.role,
            content=entry.content,
            extra=entry.extra,
            token_count=entry.token_count,
            message=entry_message(entry),
        )

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> ArchivedEntry:
        """An entry of a stored document (missing keys read as empty)."""
        message = item.get("message")
        return cls(
            id=_int_or_none(item.get("id")),
            position=int(item.get("position") or 0),
            kind=str(item.get("kind") or ContextEntry.Kind.MESSAGE),
            message_id=_int_or_none(item.get("message_id")),
            seq=_int_or_none(item.get("seq")),
            compaction_id=_int_or_none(item.get("compaction_id")),
            role=str(item.get("role") or ""),
            content=item.get("content"),
            extra=dict(item.get("extra") or {}),
            token_count=int(item.get("token_count") or 0),
            message=dict(message) if isinstance(message, Mapping) else {},
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-ready apart from `default=str` values)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ArchiveHeader:
    """Which compaction an archive belongs to."""

    session: str
    compaction: int
    created_at: datetime | str
    trigger: str
    #: True for the archive of an agent's own compaction, made by an import.
    imported: bool = False


@dataclass(frozen=True, slots=True)
class Archive:
    """A whole archive: the replaced entries and the entries a compaction transformed."""

    header: ArchiveHeader
    entries: tuple[ArchivedEntry, ...]
    transformed: tuple[ArchivedEntry, ...] = ()
    version: int = ARCHIVE_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The archive as its JSON document."""
        return {
            **_header_dict(self.header, self.version),
            "entries": [e.to_dict() for e in self.entries],
            "transformed": [e.to_dict() for e in self.transformed],
        }


def write_archive(
    header: ArchiveHeader,
    entries: Iterable[ArchivedEntry],
    transformed: Iterable[ArchivedEntry] = (),
) -> str:
    """Write an archive through the default storage; its stored name.

    An archive never replaces a stored one: a taken name gets a free one next to it
    (`storage.save_new`), whatever the storage backend's overwrite setting.

    `entries` may be a generator: it is streamed to a temporary file, never held whole.
    Raises ArchiveUnavailable when the storage refuses (nothing is left behind then).
    """
    created = header.created_at
    stamp = created if isinstance(created, datetime) else datetime.fromisoformat(created)
    name = f"{ARCHIVE_PREFIX}/{archive_name(header.session, stamp, header.compaction)}"
    try:
        with tempfile.TemporaryFile() as spool:
            head = json.dumps(_header_dict(header, ARCHIVE_VERSION), ensure_ascii=False)
            spool.write(head[:-1].encode() + b', "entries": ')
            _write_list(spool, entries)
            spool.write(b', "transformed": ')
            _write_list(spool, transformed)
            spool.write(b"}")
            spool.seek(0)
            return save_new(name, File(spool))
    except (OSError, TypeError, ValueError) as error:
        raise ArchiveUnavailable(f"could not write the archive: {error}") from error


def read_archive(compaction: Compaction) -> Archive:
    """The archive of `compaction`; ArchiveUnavailable when it is missing or unreadable."""
    if not compaction.archive:
        raise ArchiveUnavailable(f"compaction #{compaction.number} has no archive")
    try:
        with default_storage.open(compaction.archive.name or "", "rb") as handle:
            document = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError) as error:
        raise ArchiveUnavailable(
            f"could not read the archive of #{compaction.number}: {error}"
        ) from error
    if not isinstance(document, dict):
        raise ArchiveUnavailable(f"the archive of #{compaction.number} is not an archive document")
    return parse_archive(document)


def parse_archive(document: Mapping[str, Any]) -> Archive:
    """An archive from its JSON document, current or unversioned (version 0)."""
    header = ArchiveHeader(
        session=str(document.get("session") or ""),
        compaction=int(document.get("compaction") or 0),
        created_at=str(document.get("created_at") or ""),
        trigger=str(document.get("trigger") or ""),
        imported=bool(document.get("imported", False)),
    )
    return Archive(
        header=header,
        entries=_entries(document.get("entries")),
        transformed=_entries(document.get("transformed")),
        version=int(document.get("version") or 0),
    )


def _header_dict(header: ArchiveHeader, version: int) -> dict[str, Any]:
    created = header.created_at
    return {
        "version": version,
        "session": header.session,
        "compaction": header.compaction,
        "created_at": created.isoformat() if isinstance(created, datetime) else created,
        "trigger": header.trigger,
        "imported": header.imported,
    }


def _write_list(spool: Any, entries: Iterable[ArchivedEntry]) -> None:
    spool.write(b"[")
    for index, entry in enumerate(entries):
        if index:
            spool.write(b",\n")
        spool.write(json.dumps(entry.to_dict(), ensure_ascii=False, default=str).encode())
    spool.write(b"]")


def _entries(items: Any) -> tuple[ArchivedEntry, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(ArchivedEntry.from_dict(i) for i in items if isinstance(i, Mapping))


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
