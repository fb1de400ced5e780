"""The reaper of lost background jobs: a worker that died stops stamping its job's heartbeat.

`reap_stale_jobs` (run by every `manage.py db_worker` on start and periodically) fails such
a job and its django-tasks-db result row, then queues the job once more within
MAX_ATTEMPTS (services/background/jobs.py). Safe to run from several workers at once.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import CompactionJob
from sessions_app.services.background.jobs import MAX_ATTEMPTS, run_compaction_job, stale_seconds

__all__ = ["reap_stale_jobs"]

logger = logging.getLogger("sessions_app")


def reap_stale_jobs(timeout: float | None = None) -> list[str]:
    """Fail jobs whose worker was lost (no heartbeat for `timeout` s) and re-queue them once.

    Also fails their django-tasks-db result rows, which would otherwise stay RUNNING forever.
    Safe to run from several workers at once. Returns the ids of the jobs it handled.
    """
    cutoff = timezone.now() - timedelta(seconds=stale_seconds() if timeout is None else timeout)
    stale = CompactionJob.objects.filter(status=CompactionJob.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    handled = [str(pk) for pk in stale.values_list("pk", flat=True) if _reap(pk, cutoff)]
    handled += [str(pk) for pk in _orphaned_queued(cutoff) if _reap(pk, cutoff, queued=True)]
    return handled


def _orphaned_queued(cutoff: Any) -> list[Any]:
    """Queued jobs whose task was claimed by a worker that died before the job started."""
    from django_tasks_db.models import DBTaskResult

    lost_tasks = DBTaskResult.objects.filter(status="RUNNING", started_at__lt=cutoff).values_list(
        "id", flat=True
    )
    ids = [str(task_id) for task_id in lost_tasks]
    if not ids:
        return []
    candidates = CompactionJob.objects.filter(status=CompactionJob.Status.QUEUED)
    return [job.pk for job in candidates if _same_uuid(job.task_id, ids)]


def _same_uuid(task_id: str, ids: list[str]) -> bool:
    normal = task_id.replace("-", "").lower()
    return any(normal == other.replace("-", "").lower() for other in ids)


def _reap(job_id: Any, cutoff: Any, *, queued: bool = False) -> bool:
    with transaction.atomic():
        job = CompactionJob.objects.select_for_update().filter(pk=job_id).first()
        expected = CompactionJob.Status.QUEUED if queued else CompactionJob.Status.RUNNING
        if job is None or job.status != expected:
            return False
        if not queued and job.heartbeat_at and job.heartbeat_at >= cutoff:
            return False
        _fail_task_result(job.task_id)
        now = timezone.now()
        note = {"phase": "worker_lost", "at": now.isoformat(), "attempt": job.attempts}
        if job.attempts < MAX_ATTEMPTS:
            job.status = CompactionJob.Status.QUEUED
            job.phase = "requeued"
            job.error = f"worker lost during attempt {job.attempts}; queued again"
            job.events = [*job.events, note]
            job.task_id = str(run_compaction_job.enqueue(str(job.pk)).id)
        else:
            job.status = CompactionJob.Status.FAILED
            job.phase = "failed"
            job.error = f"worker lost during attempt {job.attempts} of {MAX_ATTEMPTS}; not retried"
            job.events = [*job.events, note]
            job.finished_at = now
        job.save()
    logger.warning(
        "reaped a lost compaction job: %s",
        job.error,
        extra={"job": str(job_id), "session_id": str(job.session_id), "status": job.status},
    )
    return True


def _fail_task_result(task_id: str) -> None:
    """Mark a django-tasks-db result row that is stuck RUNNING as FAILED."""
    if not task_id:
        return
    from django_tasks_db.models import DBTaskResult

    DBTaskResult.objects.filter(id=task_id, status="RUNNING").update(
        status="FAILED",
        finished_at=timezone.now(),
        exception_class_path="sessions_app.services.background.jobs.WorkerLost",
        traceback="WorkerLost: the worker running this task stopped sending heartbeats",
    )
