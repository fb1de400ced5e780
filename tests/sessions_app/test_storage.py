"""sessions_app.storage: the exclusive blob store over Django storage; deleting a stored file
quietly."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, default_storage

from compaction import ExclusiveBlobStore, offload_tool_results
from sessions_app import storage
from sessions_app.storage import DjangoStorageBlobStore, delete_stored_quietly


def test_delete_stored_quietly_deletes_the_file() -> None:
    name = default_storage.save("archives/test/delete-me.json", ContentFile(b"{}"))
    delete_stored_quietly(name)
    assert not default_storage.exists(name)


def test_delete_stored_quietly_logs_a_failure_instead_of_raising(
    monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Refusing:
        def delete(self, name: str) -> None:
            raise PermissionError(f"simulated: cannot delete {name}")

    monkeypatch.setattr(storage, "default_storage", Refusing())
    with caplog.at_level(logging.WARNING, logger="sessions_app"):
        delete_stored_quietly("archives/x.json")
    [record] = [r for r in caplog.records if r.name == "sessions_app"]
    assert record.levelno == logging.WARNING
    assert record.file == "archives/x.json"  # type: ignore[attr-defined]
    assert "simulated: cannot delete" in caplog.text


class _Forgetful(FileSystemStorage):
    """A storage whose `exists` says no to its callers: as if another writer created the file
    right after the check (the race an exclusive creation must survive). Its own choice of a
    free name still sees the truth."""

    choosing = False

    def exists(self, name: str) -> bool:
        return self.choosing and super().exists(name)

    def get_available_name(self, name: str, max_length: int | None = None) -> str:
        self.choosing = True
        try:
            return super().get_available_name(name, max_length)
        finally:
            self.choosing = False


def _blob_store(tmp_path: Path, storage_class: type[FileSystemStorage] = FileSystemStorage) -> Any:
    return DjangoStorageBlobStore("offload/s1", storage_class(location=str(tmp_path)))


def test_the_blob_store_creates_exclusively(tmp_path: Path) -> None:
    assert isinstance(_blob_store(tmp_path), ExclusiveBlobStore)


def test_create_leaves_an_existing_blob_alone(tmp_path: Path) -> None:
    store = _blob_store(tmp_path)
    location = store.create("tool-result-a.md", b"first")

    assert location == str(tmp_path / "offload/s1/tool-result-a.md")
    assert store.create("tool-result-a.md", b"second") is None
    assert store.read("tool-result-a.md") == b"first"


def test_create_that_loses_a_race_keeps_the_winner_and_leaves_no_copy(tmp_path: Path) -> None:
    store = _blob_store(tmp_path, _Forgetful)
    store.write("tool-result-a.md", b"winner")

    assert store.create("tool-result-a.md", b"loser") is None
    assert store.read("tool-result-a.md") == b"winner"
    assert [p.name for p in (tmp_path / "offload/s1").iterdir()] == ["tool-result-a.md"]


def test_write_never_replaces_a_blob(tmp_path: Path) -> None:
    store = _blob_store(tmp_path)
    first = store.write("compact-1.json", b"first")
    second = store.write("compact-1.json", b"second")

    assert first != second
    assert Path(first).read_bytes() == b"first"
    assert Path(second).read_bytes() == b"second"


class _Replacing(FileSystemStorage):
    """A storage that saves under the name given even when it is taken, replacing the file
    (django-storages' S3 backend unless `file_overwrite` is false)."""

    def __init__(self, location: str) -> None:
        super().__init__(location=location, allow_overwrite=True)


def test_write_never_replaces_a_blob_on_a_storage_that_would(tmp_path: Path) -> None:
    store = _blob_store(tmp_path, _Replacing)
    first = store.write("compact-1.json", b"first")
    second = store.write("compact-1.json", b"second")

    assert first != second
    assert Path(first).read_bytes() == b"first"
    assert Path(second).read_bytes() == b"second"


def test_offloading_after_a_racing_writer_takes_the_next_name(tmp_path: Path) -> None:
    """The engine's exists check passes, yet the name is taken when the file is written: the
    existing file stays and the reference names the file that holds this content."""
    store = _blob_store(tmp_path, _Forgetful)
    store.write("tool-result-call_0.md", b"an earlier turn's output")
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_0", "name": "sh", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "x" * 200}],
        },
    ]

    result = offload_tool_results(messages, None, min_chars=100, store=store)

    assert store.read("tool-result-call_0.md") == b"an earlier turn's output"
    assert "tool-result-call_0-1.md" in json.dumps(result.messages)
    assert store.read("tool-result-call_0-1.md") == b"x" * 200
