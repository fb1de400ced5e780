"""Django's SQLite backend, with the write transactions of all processes taking turns
(docs/deployment.md, "SQLite").

SQLite lets one writer in at a time. The others retry after growing sleeps (its busy
handler sleeps 1, 2, 5, ... up to 100 ms between tries), not in the order they came, so
under ASGI, where a process runs many requests' writes at once, one write could wait
seconds while later ones went first. Here a transaction (which begins IMMEDIATE, taking
SQLite's write lock at once: `transaction_mode` in ctxweb/settings.py) first takes its
process's writer lock, which hands over to the next waiting thread as soon as the holder
commits or rolls back, then a lock on the file `<database>-writer` shared by the processes
(the web workers, the task worker), tried every millisecond. A thread waits for each at
most the busy timeout; past it, its transaction begins anyway and SQLite decides, as it
would without these locks. A process that dies lets go of its file lock with it. An
in-memory database (the test database) has no other process and is left to SQLite.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from typing import IO, Any

from django.db.backends.sqlite3 import base

__all__ = ["DatabaseWrapper"]

#: One writer at a time per process: the connections of all its threads share it.
_WRITER = threading.Lock()
#: The processes' writer lock files, opened once per process (by process id and database
#: file: a forked child opens its own, since a lock taken through an inherited open file
#: would be its parent's too).
_FILES: dict[tuple[int, str], IO[bytes]] = {}
_FILES_LOCK = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    """The SQLite backend; a transaction holds the process's writer lock from its BEGIN to
    its COMMIT or ROLLBACK (or the connection's close)."""

    _holds_writer = False
    _holds_file: IO[bytes] | None = None

    def _start_transaction_under_autocommit(self) -> None:
        # An in-memory database (the test database) lives in one process, and Django's test
        # framework shares its connection between threads inside a transaction that lasts a
        # whole test: its writers are SQLite's alone.
        if not self.is_in_memory_db():
            wait = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
            self._holds_writer = _WRITER.acquire(timeout=wait)
            if self._holds_writer:
                self._holds_file = _lock_file(str(self.settings_dict["NAME"]), wait)
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._release_writer()
            raise

    def _commit(self) -> Any:
        try:
            return super()._commit()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _rollback(self) -> Any:
        try:
            return super()._rollback()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _close(self) -> Any:
        try:
            return super()._close()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _release_writer(self) -> None:
        if self._holds_file is not None:
            fcntl.flock(self._holds_file, fcntl.LOCK_UN)
            self._holds_file = None
        if self._holds_writer:
            self._holds_writer = False
            _WRITER.release()


def _lock_file(database: str, wait: float) -> IO[bytes] | None:
    """The processes' writer lock of `database`, taken (tried every millisecond for at most
    `wait` seconds); None when it could not be taken or the file cannot be opened."""
    key = (os.getpid(), database)
    with _FILES_LOCK:
        if key not in _FILES:
            try:
                _FILES[key] = open(f"{database}-writer", "ab")  # noqa: SIM115 (kept open)
            except OSError:
                return None
        handle = _FILES[key]
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.001)
