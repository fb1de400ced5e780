"""sessions_app.storage: deleting a stored file quietly."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from sessions_app import storage
from sessions_app.storage import delete_stored_quietly


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
