"""What an import keeps beside its rows: compaction archives and the raw source file.

`write_archive` is the one place importing writes an archive (the entries an imported
compaction replaced, streamed so a large compaction needs little memory), through
services/compacting/archives.py, the format's owner.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

from django.core.files import File
from django.core.files.storage import default_storage

from sessions_app.importers import ImportedSession
from sessions_app.importers.source import Source
from sessions_app.models import Compaction, Session
from sessions_app.services.compacting import archives
from sessions_app.services.compacting.archives import ArchivedEntry, ArchiveHeader
from sessions_app.unstorable import clean_text

__all__ = ["RAW_NAME_CHARS", "archive_source", "write_archive"]

#: Longest file name (characters) of an archived raw source.
RAW_NAME_CHARS: Final = 40


def write_archive(session: Session, row: Compaction, entries: Iterable[dict[str, Any]]) -> str:
    """Store the entries `row` replaced as its archive (the format's owner is
    services/compacting/archives.py); entries are streamed. Returns the stored file name."""
    header = ArchiveHeader(str(session.pk), row.number, row.created_at, row.trigger, imported=True)
    return archives.write_archive(header, (ArchivedEntry.from_dict(e) for e in entries))


def archive_source(
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
    safe = short_name(clean_text(os.path.basename(filename.replace("\\", "/"))))
    field = Session._meta.get_field("raw_source")
    stored = default_storage.save(
        f"sources/{session.pk}/{safe}", File(file), max_length=field.max_length
    )
    return str(stored)


def short_name(name: str) -> str:
    """`name` cut to RAW_NAME_CHARS characters, its extension kept: the storage name must fit
    the file field (100 characters) and the file system (255 bytes per name)."""
    name = name.strip() or "transcript"
    if len(name) <= RAW_NAME_CHARS:
        return name
    stem, ext = os.path.splitext(name)
    ext = ext[:16]
    return stem[: RAW_NAME_CHARS - len(ext)] + ext
