"""The database settings (ctxweb.settings.database_settings): persistent connections under
WSGI, none under ASGI, where PostgreSQL connections come from a pool instead."""

from __future__ import annotations

from ctxweb.settings import database_settings

PG = "postgresql://ctxweb@db.internal:5432/ctxweb"
SQLITE = "sqlite:////srv/ctxweb/ctxweb.sqlite3"


def test_a_wsgi_process_keeps_its_connections_for_conn_max_age() -> None:
    database = database_settings({"DATABASE_URL": PG, "CTXWEB_CONN_MAX_AGE": "60"})
    assert database["CONN_MAX_AGE"] == 60
    assert "pool" not in database["OPTIONS"]


def test_an_asgi_process_on_postgresql_pools_its_connections() -> None:
    environ = {"DATABASE_URL": PG, "CTXWEB_CONN_MAX_AGE": "60", "CTXWEB_ASGI_PROCESS": "1"}
    database = database_settings(environ)
    assert database["CONN_MAX_AGE"] == 0, "Django refuses a pool with persistent connections"
    assert database["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 10, "timeout": 10.0}


def test_the_pool_size_and_wait_are_set_or_the_pool_turned_off() -> None:
    asgi = {"DATABASE_URL": PG, "CTXWEB_ASGI_PROCESS": "1"}
    sized = database_settings({**asgi, "CTXWEB_DB_POOL_SIZE": "4", "CTXWEB_DB_POOL_TIMEOUT": "2.5"})
    assert sized["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 4, "timeout": 2.5}
    off = database_settings({**asgi, "CTXWEB_DB_POOL_SIZE": "0", "CTXWEB_CONN_MAX_AGE": "60"})
    assert "pool" not in off["OPTIONS"]
    assert off["CONN_MAX_AGE"] == 0, "no pool: a new connection per request, closed after it"


def test_a_wsgi_process_pools_only_when_asked() -> None:
    database = database_settings(
        {"DATABASE_URL": PG, "CTXWEB_CONN_MAX_AGE": "60", "CTXWEB_DB_POOL_SIZE": "3"}
    )
    assert (database["CONN_MAX_AGE"], database["OPTIONS"]["pool"]["max_size"]) == (0, 3)


def test_sqlite_under_asgi_closes_its_connections_and_has_no_pool() -> None:
    environ = {"DATABASE_URL": SQLITE, "CTXWEB_CONN_MAX_AGE": "60", "CTXWEB_ASGI_PROCESS": "1"}
    database = database_settings(environ)
    assert database["CONN_MAX_AGE"] == 0
    assert "pool" not in database["OPTIONS"]
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
