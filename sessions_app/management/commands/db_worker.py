"""`manage.py db_worker`: django-tasks-db's worker that survives database outages, plus the
reaper of lost compaction jobs and a heartbeat.

- When the database connection drops, django-tasks-db's worker exits. This one waits and
  reconnects instead: 1 s, then twice as long each time up to 30 s, logging every attempt,
  and goes back to claiming jobs once `SELECT 1` answers (docs/deployment.md, faults).
- The reaper runs once when the worker starts and then every CTXWEB_REAPER_INTERVAL_SECONDS
  (default 30) in a daemon thread, so a job whose worker was killed mid-run is failed and
  queued again (see sessions_app.services.background.reaper.reap_stale_jobs).
- A heartbeat (sessions_app.services.background.heartbeat) is written every
  CTXWEB_JOB_HEARTBEAT_SECONDS, for `GET /api/health`.

sessions_app comes before django_tasks_db in INSTALLED_APPS, so this command replaces theirs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from django.conf import settings
from django.core.management.base import CommandError
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.db import connections as all_connections
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand
from django_tasks_db.management.commands.db_worker import Worker

from sessions_app.services.background.heartbeat import HeartbeatWriter
from sessions_app.services.background.jobs import heartbeat_seconds
from sessions_app.services.background.reaper import reap_stale_jobs

logger = logging.getLogger("sessions_app")

#: Errors of a lost or refused database connection: the worker waits and reconnects.
CONNECTION_ERRORS: Final = (OperationalError, InterfaceError)
#: The first wait before reconnecting, and the longest (each failed attempt doubles it).
RECONNECT_FIRST_SECONDS: Final = 1.0
RECONNECT_MAX_SECONDS: Final = 30.0


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


def backoff_delays() -> Iterator[float]:
    """1, 2, 4, 8, 16, 30, 30, … seconds: the waits between reconnection attempts."""
    delay = RECONNECT_FIRST_SECONDS
    while True:
        yield delay
        delay = min(delay * 2, RECONNECT_MAX_SECONDS)


class ReconnectingWorker(Worker):
    """django-tasks-db's Worker that waits for a lost database instead of exiting.

    `sleep` is the wait between attempts (tests pass one that records the delays). `state`
    is what the heartbeat reports: polling, or reconnecting while the database is away.
    """

    def __init__(self, *, sleep: Callable[[float], None] = time.sleep, **options: Any) -> None:
        super().__init__(**options)
        self.sleep = sleep
        self.state = "polling"

    def run(self) -> None:
        while True:
            try:
                super().run()
            except CONNECTION_ERRORS as error:
                if not self.running:
                    raise
                self.reconnect(error)
                continue
            return

    def reconnect(self, error: BaseException) -> None:
        """Wait (with backoff) until the database answers again."""
        self.state = "reconnecting"
        for attempt, delay in enumerate(backoff_delays(), start=1):
            logger.warning(
                "worker: database unavailable (%s); reconnecting in %g s",
                error,
                delay,
                extra={"worker_id": self.worker_id, "attempt": attempt, "delay_seconds": delay},
            )
            self.sleep(delay)
            try:
                _reconnected()
            except CONNECTION_ERRORS as again:
                error = again
                continue
            logger.warning(
                "worker: database reachable again after %d attempt(s); claiming jobs",
                attempt,
                extra={"worker_id": self.worker_id, "attempt": attempt},
            )
            self.state = "polling"
            return


def _reconnected() -> None:
    """Drop every (maybe broken) connection, open a new one and run `SELECT 1` on it."""
    for alias in all_connections:
        # A broken connection may fail to close; the next query opens a new one anyway.
        with contextlib.suppress(*CONNECTION_ERRORS):
            all_connections[alias].close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


class Command(DbWorkerCommand):
    help = (
        "Run a database background worker that reconnects when the database is lost; lost "
        "compaction jobs are reaped on start and periodically."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.configure_logging(options["verbosity"])
        worker = self.make_worker(options)
        reap_quietly()
        stop = threading.Event()
        reaper = threading.Thread(
            target=_reap_periodically, args=(stop, reaper_interval()), name="reaper", daemon=True
        )
        heartbeat = HeartbeatWriter(
            worker.worker_id,
            heartbeat_seconds(),
            state=lambda: worker.state,
            on_error=lambda error: logger.warning("worker heartbeat not written: %s", error),
        )
        reaper.start()
        heartbeat.start()
        reload = options["reload"]
        if reload and options["batch"]:
            logger.warning("--reload and --batch cannot be specified together: not reloading")
            reload = False
        try:
            self.run_worker(worker, reload=reload)
        finally:
            stop.set()
            heartbeat.stop()

    def make_worker(self, options: dict[str, Any]) -> ReconnectingWorker:
        """The worker for the command's options (as django-tasks-db's command reads them)."""
        queue_names = options["queue_name"].split(",")
        excluded = options["exclude_queues"].split(",") if options["exclude_queues"] else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        return ReconnectingWorker(
            queue_names=queue_names,
            interval=options["interval"],
            batch=options["batch"],
            backend_name=options["backend_name"],
            startup_delay=options["startup_delay"],
            max_tasks=options["max_tasks"],
            worker_id=options["worker_id"],
            excluded_queue_names=excluded,
        )

    def run_worker(self, worker: ReconnectingWorker, *, reload: bool) -> None:
        """Run `worker` until it stops, under the autoreloader when asked."""
        if reload:
            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()  # only the reloaded child handles signals
            run_with_reloader(worker.run)
            return
        worker.configure_signals()
        worker.run()
