"""The database found unreachable: for a few seconds the proxy does not wait on it again.

Under ASGI on PostgreSQL a request waits up to CTXWEB_DB_POOL_TIMEOUT seconds (10) for a
pooled connection (docs/deployment.md), so with the database down every proxied request
would wait that long before failing open. Once a request of this process finds the
database unreachable, the proxy's requests skip it for `PAUSE_SECONDS`: a caller bringing
its own provider key (`X-Ctxweb-Key`) is forwarded at once, unrecorded; one relying on the
server's provider key is answered 503 at once (its ctxweb key cannot be checked). The first
request after the pause tries the database again.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from django.db import InterfaceError, OperationalError, connection

__all__ = ["PAUSE_SECONDS", "database_paused", "note_failure"]

logger = logging.getLogger("sessions_app")

#: How long the proxy leaves an unreachable database alone.
PAUSE_SECONDS: Final = 5.0

_paused_until = 0.0


def database_paused() -> bool:
    """True while the proxy leaves the database alone (a failure was noted just before)."""
    return time.monotonic() < _paused_until


def note_failure(error: BaseException) -> None:
    """`error` was raised in this thread: when no connection to the database could be
    opened (not a constraint, a bad query or a busy SQLite file), the proxy leaves the
    database alone for PAUSE_SECONDS."""
    global _paused_until
    if not isinstance(error, OperationalError | InterfaceError) or connection.connection:
        return
    if not database_paused():
        logger.warning(
            "proxy: the database is unreachable; requests skip it for %.0f s", PAUSE_SECONDS
        )
    _paused_until = time.monotonic() + PAUSE_SECONDS
