"""sessions_app.services.compacting.archives: the typed archive document, written and read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, default_storage

from sessions_app.models import Compaction
from sessions_app.services.compacting.archives import (
    ARCHIVE_VERSION,
    Archive,
    ArchivedEntry,
    ArchiveHeader,
    ArchiveUnavailable,
    parse_archive,
    read_archive,
    write_archive,
)
from sessions_app.services.errors import Unavailable

SESSION = "0b6f8f5e-1f0e-4d43-9a55-5f1f2b3c4d5e"
WHEN = datetime(2026, 5, 1, 12, 30, tzinfo=UTC)


def entry(position: int, **fields: Any) -> ArchivedEntry:
    values: dict[str, Any] = {
        "id": 100 + position,
        "position": position,
        "kind": "message",
        "message_id": 200 + position,
        "seq": position,
        "compaction_id": None,
        "role": "user",
        "content": None,
        "extra": {},
        "token_count": 7,
        "message": {"role": "user", "content": f"message {position}"},
    }
    values.update(fields)
    return ArchivedEntry(**values)


def compaction_at(name: str, number: int = 3) -> Compaction:
    row = Compaction(number=number)
    row.archive.name = name
    return row


def stored(document: Any) -> str:
    data = json.dumps(document).encode()
    return str(default_storage.save(f"archives/{SESSION}/old.json", ContentFile(data)))


def test_an_archive_is_written_streamed_and_read_back_typed() -> None:
    header = ArchiveHeader(SESSION, 3, WHEN, "auto")
    entries = (entry(p) for p in range(3))  # a generator: streamed, never held whole
    name = write_archive(header, entries, [entry(5, content="new text")])
    assert name.startswith(f"archives/{SESSION}/")

    archive = read_archive(compaction_at(name))

    assert archive.version == ARCHIVE_VERSION
    assert archive.header == ArchiveHeader(SESSION, 3, WHEN.isoformat(), "auto")
    assert archive.entries == tuple(entry(p) for p in range(3))
    assert archive.transformed == (entry(5, content="new text"),)


def test_the_file_on_disk_keeps_the_documented_keys() -> None:
    name = write_archive(ArchiveHeader(SESSION, 3, WHEN, "manual", imported=True), [entry(0)])
    with default_storage.open(name) as handle:
        document = json.load(handle)
    assert document == {
        "version": 1,
        "session": SESSION,
        "compaction": 3,
        "created_at": WHEN.isoformat(),
        "trigger": "manual",
        "imported": True,
        "entries": [entry(0).to_dict()],
        "transformed": [],
    }
    assert parse_archive(document) == read_archive(compaction_at(name))


def test_an_unversioned_archive_of_an_earlier_release_is_read_as_version_0() -> None:
    old = {
        "session": SESSION,
        "compaction": 2,
        "created_at": WHEN.isoformat(),
        "trigger": "imported",
        "imported": True,
        "entries": [{**entry(4).to_dict(), "id": None}, "not an entry"],
        "transformed": [],
    }

    archive = read_archive(compaction_at(stored(old), number=2))

    assert archive.version == 0
    assert archive.header.imported
    assert archive.entries == (entry(4, id=None),)


@pytest.mark.parametrize(
    "content", [b"[1, 2]", b"{not json", b"\xff\xfe"], ids=["list", "json", "utf8"]
)
def test_an_unreadable_archive_is_unavailable_not_a_crash(content: bytes) -> None:
    name = str(default_storage.save(f"archives/{SESSION}/bad.json", ContentFile(content)))
    with pytest.raises(ArchiveUnavailable) as info:
        read_archive(compaction_at(name, number=4))
    assert isinstance(info.value, Unavailable)
    assert "#4" in str(info.value)


def test_a_missing_archive_is_unavailable() -> None:
    with pytest.raises(ArchiveUnavailable, match="has no archive"):
        read_archive(Compaction(number=1))
    with pytest.raises(ArchiveUnavailable, match="could not read"):
        read_archive(compaction_at(f"archives/{SESSION}/gone.json"))


def test_an_archive_never_replaces_a_stored_one(settings: Any, tmp_path: Path) -> None:
    """Even on a storage that replaces a taken name when asked to save under it (as
    django-storages' S3 backend does unless `file_overwrite` is false)."""
    replacing = {"location": str(tmp_path), "allow_overwrite": True}
    backend = "django.core.files.storage.FileSystemStorage"
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": backend, "OPTIONS": replacing}}
    header = ArchiveHeader(SESSION, 3, WHEN, "manual")

    first = write_archive(header, [entry(0)])
    second = write_archive(header, [entry(1)])

    assert first != second
    assert read_archive(compaction_at(first)).entries == (entry(0),)
    assert read_archive(compaction_at(second)).entries == (entry(1),)
    assert sorted(path.name for path in (tmp_path / "archives" / SESSION).iterdir()) == sorted(
        [Path(first).name, Path(second).name]
    )


def test_a_storage_that_refuses_the_write_is_unavailable(monkeypatch: Any) -> None:
    def refuse(*args: Any, **kwargs: Any) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(FileSystemStorage, "save", refuse)
    with pytest.raises(ArchiveUnavailable, match="disk full"):
        write_archive(ArchiveHeader(SESSION, 1, WHEN, "manual"), [entry(0)])


def test_to_dict_is_the_json_document() -> None:
    archive = Archive(ArchiveHeader(SESSION, 1, WHEN, "api"), (entry(0),))
    document = archive.to_dict()
    assert document["version"] == ARCHIVE_VERSION
    assert document["created_at"] == WHEN.isoformat()
    assert parse_archive(json.loads(json.dumps(document))).entries == archive.entries
