"""The embedded default under load (issue 26 item 4): SQLite as `make run` serves it, in WAL
mode with a busy timeout, each write transaction taking the write lock when it begins
(`transaction_mode="IMMEDIATE"`), so concurrent writers wait their turn instead of failing
halfway with "database is locked", and readers never wait for a writer."""

from __future__ import annotations

import fcntl
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db.utils import ConnectionHandler

from ctxweb.settings import database_settings
from ctxweb.sqlite import base as sqlite_backend
from tests.deploy.conftest import manage, subprocess_env

RESULT = "SQLITE-WRITERS:"


@pytest.fixture
def handler(tmp_path: Path, django_db_blocker: Any) -> Iterator[ConnectionHandler]:
    """Connections (one per thread) made from the settings `make run` uses, on a file of
    their own (not the test database: pytest-django is told these are ours)."""
    path = tmp_path / "ctxweb.sqlite3"
    made = ConnectionHandler({"default": database_settings({"DATABASE_URL": f"sqlite:///{path}"})})
    with django_db_blocker.unblock():
        try:
            yield made
        finally:
            made.close_all()


@pytest.fixture
def served(tmp_path: Path, django_db_blocker: Any) -> Iterator[tuple[Any, Path]]:
    """A connection made from the settings `make run` uses, on a file of its own (not the
    test database: pytest-django is told this one is ours)."""
    path = tmp_path / "ctxweb.sqlite3"
    handler = ConnectionHandler(
        {"default": database_settings({"DATABASE_URL": f"sqlite:///{path}"})}
    )
    wrapper = handler["default"]
    with django_db_blocker.unblock():
        try:
            yield wrapper, path
        finally:
            wrapper.close()


def test_write_transactions_of_one_process_take_turns(handler: ConnectionHandler) -> None:
    """A second transaction waits for the first to end (the process's writer lock,
    ctxweb/sqlite/base.py), then begins: it neither fails nor polls SQLite's busy handler."""
    first = handler["default"]
    assert first.vendor == "sqlite"
    assert type(first).__module__ == "ctxweb.sqlite.base"
    with first.cursor() as cursor:
        cursor.execute("CREATE TABLE note (text TEXT)")
    first.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    began = threading.Event()
    done: list[str] = []

    def second_writer() -> None:
        second = handler["default"]  # this thread's own connection
        second.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
        began.set()
        with second.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES ('second')")
        second.commit()
        second.set_autocommit(True)
        done.append("second")
        second.close()

    thread = threading.Thread(target=second_writer)
    thread.start()
    assert not began.wait(0.5), "the second transaction began while the first was open"
    assert sqlite_backend._WRITER.locked()  # it waits in the process, not in SQLite's retries
    with first.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES ('first')")
    first.commit()
    first.set_autocommit(True)
    thread.join(10)
    assert done == ["second"]
    assert not sqlite_backend._WRITER.locked()
    with first.cursor() as cursor:
        cursor.execute("SELECT text FROM note ORDER BY rowid")
        assert cursor.fetchall() == [("first",), ("second",)]


def test_a_transaction_waits_for_another_processs_writer(
    handler: ConnectionHandler, tmp_path: Path
) -> None:
    """The processes take turns through the lock file beside the database: held by another
    (here an open file of its own, as another process's would be), a transaction waits."""
    connection = handler["default"]
    connection.ensure_connection()
    began = threading.Event()

    def writer() -> None:
        mine = handler["default"]
        mine.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
        began.set()
        mine.rollback()
        mine.set_autocommit(True)
        mine.close()

    with (tmp_path / "ctxweb.sqlite3-writer").open("ab") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        thread = threading.Thread(target=writer)
        thread.start()
        assert not began.wait(0.5), "the transaction began while another process wrote"
        fcntl.flock(other, fcntl.LOCK_UN)
        assert began.wait(5)
    thread.join(5)


def test_the_settings_are_in_force_on_every_connection(served: tuple[Any, Path]) -> None:
    wrapper, _ = served
    with wrapper.cursor() as cursor:
        found = {}
        for pragma in ("journal_mode", "busy_timeout", "synchronous"):
            cursor.execute(f"PRAGMA {pragma}")
            found[pragma] = cursor.fetchone()[0]
    assert found == {"journal_mode": "wal", "busy_timeout": 20_000, "synchronous": 1}


def test_a_transaction_holds_the_write_lock_from_its_begin_and_readers_go_on(
    served: tuple[Any, Path],
) -> None:
    wrapper, path = served
    with wrapper.cursor() as cursor:
        cursor.execute("CREATE TABLE note (text TEXT)")
        cursor.execute("INSERT INTO note VALUES ('before')")
    other = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    try:
        wrapper.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
        # Nothing written yet, but the transaction began IMMEDIATE: no other writer now...
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        # ...while a reader is served at once (WAL).
        assert other.execute("SELECT text FROM note").fetchall() == [("before",)]
        wrapper.rollback()
        wrapper.set_autocommit(True)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


@pytest.mark.slow
def test_concurrent_appends_to_shared_sessions_lose_nothing(tmp_path: Path) -> None:
    threads, turns, sessions = 12, 10, 3
    code = (
        "import json; from tests.deploy.sqlite_writers import concurrent_appends; "
        f"print({RESULT!r} + json.dumps(concurrent_appends({threads}, {turns}, {sessions})))"
    )
    completed = manage(subprocess_env(tmp_path), "shell", "-c", code, timeout=300)
    line = next(x for x in completed.stdout.splitlines() if x.startswith(RESULT))
    result = json.loads(line.removeprefix(RESULT))
    assert result["errors"] == []
    per_session = threads // sessions * turns * 2
    assert len(result["stored"]) == sessions
    for stored in result["stored"].values():
        assert stored == {
            "rows": per_session,
            "distinct_seqs": per_session,
            "message_count": per_session,
        }
