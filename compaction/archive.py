"""The archive of compacted originals (docs/behaviour.md#archives).

Name: `<session_id>/compact-<timestamp>-<seq>.json`. The timestamp (docs/behaviour.md#archives) is
ISO 8601 *basic* format in UTC to the second, `20260217T101500Z`, on purpose: the extended form
`2026-02-17T10:15:00Z` puts `:` in a file name, which Windows refuses and some object stores,
archivers and shells mishandle; the basic form is just as standard and still sorts as text. `seq`
counts the session's archives from 1, so two compactions in the same second get different names. The
content is the messages as indented JSON. A failed write is the caller's to log; it never stops a
compaction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from .blobstore import BlobStore, LocalBlobStore
from .errors import ArchiveError, BlobStoreError
from .messages import Message

__all__ = [
    "ARCHIVE_PATTERN",
    "archive_messages",
    "archive_name",
    "archive_timestamp",
    "next_sequence",
    "safe_session_id",
]

#: Matches an archive's file name; groups `timestamp` and `seq`.
ARCHIVE_PATTERN: Final = re.compile(r"^compact-(?P<timestamp>\d{8}T\d{6}Z)-(?P<seq>\d+)\.json$")
DEFAULT_SESSION_ID: Final = "default"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]")


def archive_timestamp(moment: datetime) -> str:
    """`moment` in UTC as ISO 8601 basic format to the second (naive times are taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def safe_session_id(session_id: str | None) -> str:
    """A session id usable as one folder name: other characters become `_`, never `..`."""
    if not session_id:
        return DEFAULT_SESSION_ID
    cleaned = _UNSAFE.sub("_", session_id)[:200]
    return cleaned if cleaned.strip(".") else DEFAULT_SESSION_ID


def archive_name(session_id: str | None, moment: datetime, seq: int) -> str:
    """The blob name of an archive: `<session_id>/compact-<timestamp>-<seq>.json`."""
    return f"{safe_session_id(session_id)}/compact-{archive_timestamp(moment)}-{seq}.json"


def next_sequence(store: BlobStore, session_id: str | None) -> int:
    """1 + the highest sequence among the session's archives (1 for the first).

    A local store is listed; other stores cannot list, so their sequence starts at 1 and the
    caller's collision check (or an explicit sequence) keeps names unique.
    """
    if not isinstance(store, LocalBlobStore):
        return 1
    folder = store.path(safe_session_id(session_id))
    if not folder.is_dir():
        return 1
    numbers = [
        int(match.group("seq"))
        for match in (ARCHIVE_PATTERN.match(path.name) for path in folder.iterdir())
        if match
    ]
    return max(numbers, default=0) + 1


def archive_messages(
    store: BlobStore,
    messages: Sequence[Message],
    *,
    session_id: str | None,
    moment: datetime,
    seq: int | None = None,
) -> str:
    """Write `messages` as indented JSON; return the stored location.

    Raises ArchiveError when the messages cannot be serialised or the store cannot write.
    """
    try:
        data = json.dumps(list(messages), ensure_ascii=False, indent=2).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise ArchiveError(f"messages are not JSON-serialisable: {error}") from error
    try:
        number = seq if seq is not None else next_sequence(store, session_id)
        name = archive_name(session_id, moment, number)
        while store.exists(name):  # same second, same sequence: take the next number
            number += 1
            name = archive_name(session_id, moment, number)
        return store.write(name, data)
    except (BlobStoreError, OSError) as error:
        raise ArchiveError(f"could not write the archive: {error}") from error
