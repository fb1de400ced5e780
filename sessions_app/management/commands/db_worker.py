"""`manage.py db_worker`: django-tasks-db's worker, plus the reaper of lost compaction jobs.

The reaper runs once when the worker starts and then every CTXWEB_REAPER_INTERVAL_SECONDS
(default 30) in a daemon thread, so a job whose worker was killed mid-run is failed and
queued again (see sessions_app.services.jobs.reap_stale_jobs). sessions_app comes before
django_tasks_db in INSTALLED_APPS, so this command replaces theirs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand

from sessions_app.services.jobs import reap_stale_jobs

logger = logging.getLogger("sessions_app")


def reaper_interval() -> float:
    """Seconds between two reaper runs (CTXWEB_REAPER_INTERVAL_SECONDS, 30)."""
    return float(getattr(settings, "CTXWEB_REAPER_INTERVAL_SECONDS", 30.0))


def reap_quietly() -> None:
    """One reaper run; an error is logged, never raised into the worker."""
    try:
        close_old_connections()
        handled = reap_stale_jobs()
    except Exception:
        logger.exception("reaper run failed")
        return
    if handled:
        logger.warning("reaper handled %d lost job(s)", len(handled), extra={"jobs": handled})


def _reap_periodically(stop: threading.Event, interval: float) -> None:
    try:
        while not stop.wait(interval):
            reap_quietly()
    finally:
        connection.close()


class Command(DbWorkerCommand):
    help = (
        "Run a database background worker; lost compaction jobs are reaped on start and "
        "periodically."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        reap_quietly()
        stop = threading.Event()
        thread = threading.Thread(
            target=_reap_periodically, args=(stop, reaper_interval()), name="reaper", daemon=True
        )
        thread.start()
        try:
            super().handle(*args, **options)
        finally:
            stop.set()
