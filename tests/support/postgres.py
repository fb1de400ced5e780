"""A PostgreSQL server probe and throwaway databases, shared by tests, bench and scripts.

Server URLs have no database part (``postgresql://user@host:port``). No Django here: the
callers run outside Django (bench, scripts) or create databases beside Django's own.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import psycopg

__all__ = ["available", "server_url", "throwaway_database"]


def _connect(server: str) -> psycopg.Connection[Any]:
    return psycopg.connect(f"{server.rstrip('/')}/postgres", connect_timeout=3, autocommit=True)


def available(server: str) -> bool:
    """True when the PostgreSQL server at `server` answers."""
    try:
        with _connect(server):
            return True
    except psycopg.Error:
        return False


def server_url(settings_dict: dict[str, Any]) -> str:
    """The server URL of a Django PostgreSQL DATABASES entry (no database part)."""
    user = quote(settings_dict.get("USER") or "postgres", safe="")
    password = settings_dict.get("PASSWORD")
    secret = f":{quote(password, safe='')}" if password else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgresql://{user}{secret}@{host}:{port}"


@contextmanager
def throwaway_database(server: str, prefix: str = "ctxweb_t") -> Iterator[str]:
    """The URL of a new empty database on `server`, dropped on the way out."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    with _connect(server) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server.rstrip('/')}/{name}"
    finally:
        with _connect(server) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
