"""What the watcher walks: bad entries are skipped, symlinks are not followed, and an
unchanged file costs a `stat` only (issue 23 item 9, issue 30 item 7)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Session
from sessions_app.services.importing import watching
from sessions_app.services.importing.watching import Watcher
from tests.sessions_app.transcripts import SESSION, cc_assistant, cc_user, jsonl, text

pytestmark = pytest.mark.django_db


def _transcript(session: str = SESSION) -> str:
    return jsonl(
        {**cc_user("u1", None, "Hello"), "sessionId": session},
        {**cc_assistant("a1", "u1", [text("Hi.")], "m1"), "sessionId": session},
    )


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "good.jsonl").write_text(_transcript())
    return folder


def _stored_paths(user: Any) -> list[str]:
    return sorted(Path(s.source_path).name for s in Session.objects.filter(owner=user))


def test_a_symlink_loop_a_fifo_and_a_vanished_entry_are_skipped_and_logged_once(
    user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    folder = _folder(tmp_path)
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")  # ELOOP when followed
    (folder / "a").symlink_to(folder / "b")
    (folder / "b").symlink_to(folder / "a")
    os.mkfifo(folder / "pipe.jsonl")  # opening it would block the watcher
    (folder / "gone.jsonl").write_text(_transcript("other"))
    listing = os.scandir

    def vanishing(path: Any) -> _Listing:
        entries = list(listing(path))  # listed, then removed before its stat
        (folder / "gone.jsonl").unlink(missing_ok=True)
        return _Listing(entries)

    monkeypatch.setattr(os, "scandir", vanishing)
    watcher = Watcher(user, [folder])
    with caplog.at_level(logging.WARNING, logger="sessions_app"):
        [stored] = watcher.scan()
        watcher.scan()
    assert Path(stored.path).name == "good.jsonl"
    assert _stored_paths(user) == ["good.jsonl"]
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    for name in ("loop.jsonl", "pipe.jsonl", "gone.jsonl"):
        assert sum(name in message for message in skipped) == 1, skipped


class _Listing(list[os.DirEntry[str]]):
    """A scandir result already read (a context manager like the real one)."""

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *args: object) -> None:
        return None


def test_a_file_that_cannot_be_read_is_logged_once_and_tried_again_when_it_changes(
    user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    folder = _folder(tmp_path)
    locked = folder / "locked.jsonl"
    locked.write_text(_transcript("locked"))
    tries: list[str] = []
    sync = watching.sync_file
    size = locked.stat().st_size

    def refusing(owner: Any, path: Path, **options: Any) -> watching.FileSync:
        if path.name == "locked.jsonl" and path.stat().st_size == size:  # until it changes
            tries.append(path.name)
            raise PermissionError(13, "Permission denied", str(path))
        return sync(owner, path, **options)

    monkeypatch.setattr(watching, "sync_file", refusing)
    watcher = Watcher(user, [folder])
    with caplog.at_level(logging.ERROR, logger="sessions_app"):
        watcher.scan()
        watcher.scan()
    assert tries == ["locked.jsonl"]  # not tried again while unchanged
    assert len([r for r in caplog.records if "locked.jsonl" in r.getMessage()]) == 1
    with open(locked, "a") as file:
        file.write(jsonl(cc_user("u2", "a1", "More")))
    watcher.scan()
    watcher.scan()
    assert _stored_paths(user) == ["good.jsonl", "locked.jsonl"]


def test_symlinks_inside_the_watched_folder_are_not_followed(user: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "elsewhere.jsonl").write_text(_transcript("elsewhere"))
    folder = _folder(tmp_path)
    (folder / "linked.jsonl").symlink_to(outside / "elsewhere.jsonl")
    (folder / "linked-folder").symlink_to(outside, target_is_directory=True)
    Watcher(user, [folder]).scan()
    assert _stored_paths(user) == ["good.jsonl"]


def test_a_root_named_as_a_symlink_is_followed(user: Any, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(folder, target_is_directory=True)
    Watcher(user, [link]).scan()
    assert _stored_paths(user) == ["good.jsonl"]


def test_an_unchanged_file_is_not_opened_again_by_the_watcher_or_a_restarted_one(
    user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path)
    for number in range(5):
        (folder / f"s{number}.jsonl").write_text(_transcript(f"session-{number}"))
    watcher = Watcher(user, [folder])
    assert len(watcher.scan()) == 6
    opened: list[str] = []

    def spy(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(watching, "open", spy, raising=False)
    assert watcher.scan() == []
    assert Watcher(user, [folder]).scan() == []  # a restart, or `watch_transcripts --once`
    assert opened == []
    with open(folder / "s3.jsonl", "a") as file:  # a grown file is read again
        file.write(jsonl(cc_user("u2", "a1", "More")))
    [grown] = Watcher(user, [folder]).scan()
    assert Path(grown.path).name == "s3.jsonl"
    assert [Path(p).name for p in opened] == ["s3.jsonl"]
