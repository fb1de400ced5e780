"""The checks behind `GET /api/health`: database, storage and task workers.

Each check is cheap: a write to the database that is rolled back, one small file written
and deleted through the storage that holds the archives, one read of the workers'
heartbeat. The database and the storage are required (nothing can be stored without them);
the workers are not (the API answers without them, background jobs wait), so a missing or
stale heartbeat only makes the service `degraded` (docs/deployment.md).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Final

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import DatabaseError, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import F
from django.utils import timezone

from sessions_app.services.background.heartbeat import read_worker_heartbeat
from sessions_app.services.background.jobs import stale_seconds

__all__ = ["PROBE_PREFIX", "Check", "HealthReport", "WorkerCheck", "health_report"]

logger = logging.getLogger("sessions_app")

#: Storage folder of the probe files the storage check writes and deletes.
PROBE_PREFIX: Final = "health"


@dataclass(frozen=True)
class Check:
    """One dependency: `status` is ok or error (the worker: ok, stale or absent).

    `detail` never holds an error's text: the endpoint is public, so the log has it.
    """

    status: str
    required: bool
    detail: str = ""

    @property
    def failed(self) -> bool:
        """A required dependency that does not work."""
        return self.required and self.status != "ok"


@dataclass(frozen=True)
class WorkerCheck(Check):
    """The workers' heartbeat: its age in seconds and the state the worker wrote."""

    age_seconds: float | None = None
    state: str = ""


@dataclass(frozen=True)
class HealthReport:
    """All checks and the overall status: ok, degraded (a worker problem) or error."""

    database: Check
    storage: Check
    worker: WorkerCheck

    @property
    def status(self) -> str:
        """error when a required check failed, degraded when only the worker's did."""
        if self.database.failed or self.storage.failed:
            return "error"
        return "ok" if self.worker.status == "ok" else "degraded"

    @property
    def problems(self) -> list[str]:
        """What failed, for the 503's `detail`."""
        problems = []
        if self.database.failed:
            problems.append("database unreachable")
        if self.storage.failed:
            problems.append("storage unavailable")
        return problems

    def checks(self) -> dict[str, dict[str, Any]]:
        """`{database: {...}, storage: {...}, worker: {...}}`."""
        return {
            "database": asdict(self.database),
            "storage": asdict(self.storage),
            "worker": asdict(self.worker),
        }


def health_report(now: datetime | None = None) -> HealthReport:
    """Run every check once."""
    return HealthReport(database_check(), storage_check(), worker_check(now))


def database_check() -> Check:
    """A write the database must accept (it matches no row) in a transaction rolled back.

    SELECT 1 alone answers on a read-only database (a full disk's SQLite file, a PostgreSQL
    standby); an UPDATE is refused there before it looks for rows.
    """
    try:
        with transaction.atomic():
            recorder = MigrationRecorder.Migration.objects
            recorder.filter(pk__lt=0).update(app=F("app"))
            transaction.set_rollback(True)
    except DatabaseError as error:
        logger.error("health check: the database is unavailable: %s", error)
        return Check("error", required=True, detail="unreachable or not writable")
    return Check("ok", required=True)


def storage_check() -> Check:
    """Write and delete a small probe file through the storage that holds the archives."""
    name = f"{PROBE_PREFIX}/probe-{uuid.uuid4().hex}"
    try:
        saved = default_storage.save(name, ContentFile(b"ok"))
        default_storage.delete(saved)
    except Exception as error:  # any backend's failure (OSError, a cloud SDK's error)
        logger.error("health check: the storage is unavailable: %s", error)
        return Check("error", required=True, detail="could not write and delete a file")
    return Check("ok", required=True)


def worker_check(now: datetime | None = None) -> WorkerCheck:
    """The age of the workers' last heartbeat: ok, stale (older than
    CTXWEB_JOB_STALE_SECONDS) or absent (none written, or unreadable)."""
    try:
        beat = read_worker_heartbeat()
    except Exception as error:  # a storage failure is the storage check's to report
        logger.warning("health check: the worker heartbeat is unreadable: %s", error)
        return WorkerCheck("absent", required=False, detail="heartbeat unreadable")
    if beat is None:
        return WorkerCheck("absent", required=False, detail="no worker has written a heartbeat")
    age = max(0.0, ((now or timezone.now()) - beat.at).total_seconds())
    return WorkerCheck(
        "ok" if age <= stale_seconds() else "stale",
        required=False,
        age_seconds=round(age, 1),
        state=beat.state,
    )
