"""An append-only message list that moves to a temporary file when it grows large.

Small imports stay in memory; a long transcript is written out as JSON lines with only the
offsets kept in memory, so importing a very large file needs bounded memory. Reading is by
index (one seek) or sequential.
"""

from __future__ import annotations

import json
import os
import tempfile
import weakref
from array import array
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import IO, Any, overload

from .types import ImportedMessage

__all__ = ["MessageLog"]

#: Messages kept in memory before the log moves to a temporary file.
MEMORY_MESSAGES = 2000
#: Approximate source bytes kept in memory before the log moves to a temporary file.
MEMORY_BYTES = 8 * 1024 * 1024


class MessageLog(Sequence[ImportedMessage]):
    """A sequence of ImportedMessage that spills to a temporary file past a size threshold."""

    def __init__(
        self, *, memory_messages: int = MEMORY_MESSAGES, memory_bytes: int = MEMORY_BYTES
    ) -> None:
        self._items: list[ImportedMessage] = []
        self._size = 0
        self._memory_messages = memory_messages
        self._memory_bytes = memory_bytes
        self._file: IO[bytes] | None = None
        self._offsets = array("q")
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def spilled(self) -> bool:
        """True once the messages live in a temporary file."""
        return self._file is not None

    def append(self, item: ImportedMessage, size_hint: int = 0) -> None:
        """Add a message at the end; `size_hint` is its approximate source size in bytes."""
        if self._file is None:
            self._items.append(item)
            self._size += size_hint
            if len(self._items) > self._memory_messages or self._size > self._memory_bytes:
                self._spill()
            return
        self._write(item)

    def _spill(self) -> None:
        handle, path = tempfile.mkstemp(prefix="ctxweb-import-", suffix=".jsonl")
        file = os.fdopen(handle, "w+b")
        os.unlink(path)  # removed on close; nothing is left behind if the process dies
        self._file = file
        self._finalizer = weakref.finalize(self, file.close)
        for item in self._items:
            self._write(item)
        self._items = []

    def _write(self, item: ImportedMessage) -> None:
        assert self._file is not None
        self._file.seek(0, os.SEEK_END)
        self._offsets.append(self._file.tell())
        self._file.write(_encode(item))

    def __len__(self) -> int:
        return len(self._offsets) if self._file is not None else len(self._items)

    @overload
    def __getitem__(self, index: int) -> ImportedMessage: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ImportedMessage]: ...

    def __getitem__(self, index: int | slice) -> ImportedMessage | Sequence[ImportedMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if self._file is None:
            return self._items[index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("message index out of range")
        self._file.seek(self._offsets[index])
        return _decode(self._file.readline())

    def __iter__(self) -> Iterator[ImportedMessage]:
        if self._file is None:
            yield from list(self._items)
            return
        for index in range(len(self)):
            yield self[index]

    def close(self) -> None:
        """Delete the temporary file, if any (the log is empty afterwards)."""
        if self._finalizer is not None:
            self._finalizer()
        self._file = None
        self._offsets = array("q")
        self._items = []


def _encode(item: ImportedMessage) -> bytes:
    record = {
        "m": item.message,
        "t": item.created_at.isoformat() if item.created_at else None,
        "i": item.original_id,
        "u": item.usage,
        "x": item.extra,
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _decode(line: bytes) -> ImportedMessage:
    record = json.loads(line)
    created = record["t"]
    return ImportedMessage(
        message=record["m"],
        created_at=datetime.fromisoformat(created) if created else None,
        original_id=record["i"],
        usage=record["u"],
        extra=record["x"],
    )
