"""No database connection held while a model answers (docs/architecture.md, "A compaction").

A summary call may take seconds, a slow model minutes. A pooled PostgreSQL connection kept
meanwhile is one fewer for every other request of the process; a PostgreSQL server process
kept is one fewer of its `max_connections`. So before the engine runs, the thread's
connections are handed back: closed (a pooled one goes back to its pool) unless they are
inside a transaction (the caller's: nothing of it may be lost) or SQLite's, which is a file
handle, holds no lock outside a transaction, and is costly to open again
(sessions_app/proxy/connections.py keeps it on purpose). The next query opens one again.
"""

from __future__ import annotations

from django.db import connections

__all__ = ["release_connections"]


def release_connections() -> None:
    """Close this thread's connections that hold a server resource and no transaction."""
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "sqlite" or connection.in_atomic_block:
            continue
        connection.close()
