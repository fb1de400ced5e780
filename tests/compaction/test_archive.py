"""The archive of compacted originals (docs/behaviour.md#archives)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from compaction.archive import (
    ARCHIVE_PATTERN,
    archive_messages,
    archive_name,
    archive_timestamp,
    next_sequence,
    safe_session_id,
)
from compaction.blobstore import LocalBlobStore
from compaction.errors import ArchiveError, BlobStoreError
from tests.support.histories import assistant, user

MOMENT = datetime(2026, 2, 17, 10, 15, 0, tzinfo=UTC)
MESSAGES = [user("héllo"), assistant("world")]


def test_timestamp_is_iso8601_basic_utc_to_the_second():
    assert archive_timestamp(MOMENT) == "20260217T101500Z"
    assert archive_timestamp(MOMENT.replace(microsecond=999_999)) == "20260217T101500Z"
    plus_two = MOMENT.astimezone(timezone(timedelta(hours=2)))
    assert archive_timestamp(plus_two) == "20260217T101500Z"
    assert archive_timestamp(MOMENT.replace(tzinfo=None)) == "20260217T101500Z"


def test_name_format():
    name = archive_name("abc", MOMENT, 3)

    assert name == "abc/compact-20260217T101500Z-3.json"
    assert ARCHIVE_PATTERN.match(name.split("/")[1])


@pytest.mark.parametrize(
    ("session_id", "expected"),
    [
        ("5f0c-uuid", "5f0c-uuid"),
        (None, "default"),
        ("", "default"),
        ("../../etc", ".._.._etc"),
        ("..", "default"),
        ("a/b\\c d", "a_b_c_d"),
    ],
)
def test_session_ids_become_one_safe_folder(session_id, expected):
    assert safe_session_id(session_id) == expected


def test_writes_indented_json_and_creates_parents(tmp_path):
    store = LocalBlobStore(tmp_path / "deep" / "er")

    location = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT)

    path = tmp_path / "deep" / "er" / "s" / "compact-20260217T101500Z-1.json"
    assert location == str(path)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == MESSAGES
    assert "héllo" in text  # written as UTF-8, not escaped
    assert "\n  {\n" in text


def test_sequence_counts_the_sessions_archives(tmp_path):
    store = LocalBlobStore(tmp_path)
    later = MOMENT + timedelta(minutes=5)

    first = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT)
    second = archive_messages(store, MESSAGES, session_id="s", moment=later)
    third = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT)

    assert first.endswith("compact-20260217T101500Z-1.json")
    assert second.endswith("compact-20260217T102000Z-2.json")
    assert third.endswith("compact-20260217T101500Z-3.json")
    assert next_sequence(store, "s") == 4
    assert next_sequence(store, "other") == 1


def test_explicit_sequence_never_overwrites(tmp_path):
    store = LocalBlobStore(tmp_path)

    first = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT, seq=5)
    again = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT, seq=5)

    assert first.endswith("-5.json")
    assert again.endswith("-6.json")


class MemoryStore:
    """A store that cannot list: sequences rely on the collision check."""

    def __init__(self):
        self.blobs: dict[str, bytes] = {}

    def write(self, name, data):
        self.blobs[name] = data
        return f"memory://{name}"

    def exists(self, name):
        return name in self.blobs


def test_stores_that_cannot_list_still_get_unique_names():
    store = MemoryStore()

    first = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT)
    second = archive_messages(store, MESSAGES, session_id="s", moment=MOMENT)

    assert first == "memory://s/compact-20260217T101500Z-1.json"
    assert second == "memory://s/compact-20260217T101500Z-2.json"


def test_unserialisable_messages_are_an_archive_error(tmp_path):
    with pytest.raises(ArchiveError, match="JSON"):
        archive_messages(
            LocalBlobStore(tmp_path),
            [{"role": "user", "content": {1, 2}}],
            session_id="s",
            moment=MOMENT,
        )


def test_write_failures_are_archive_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")

    with pytest.raises(ArchiveError) as caught:
        archive_messages(LocalBlobStore(blocker), MESSAGES, session_id="s", moment=MOMENT)

    assert isinstance(caught.value, BlobStoreError)
