"""When the proxy leaves the database alone (sessions_app/proxy/outage.py); the whole
behaviour under gunicorn with PostgreSQL unreachable is in tests/deploy/test_database_outage.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, IntegrityError, OperationalError, connection, connections

from sessions_app.proxy import outage


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outage, "_paused_until", 0.0)


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """This thread's connection as a failed connect leaves it: none opened."""
    monkeypatch.setattr(connections[DEFAULT_DB_ALIAS], "connection", None, raising=False)


def test_a_failed_connect_pauses_the_database_for_a_while(
    no_connection: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    outage.note_failure(OperationalError("connection refused"))
    assert outage.database_paused()
    clock[0] += outage.PAUSE_SECONDS - 0.1
    assert outage.database_paused()
    clock[0] += 0.2
    assert not outage.database_paused()  # the next request tries the database again
    assert "skip it for 5 s" in caplog.text


@pytest.mark.django_db
def test_an_error_on_an_open_connection_does_not(db: Any) -> None:
    connection.ensure_connection()  # a busy SQLite file, a query that failed...
    outage.note_failure(OperationalError("database is locked"))
    assert not outage.database_paused()


@pytest.mark.parametrize("error", [IntegrityError("duplicate"), ValueError("not the database")])
def test_other_errors_do_not(no_connection: None, error: Exception) -> None:
    outage.note_failure(error)
    assert not outage.database_paused()
