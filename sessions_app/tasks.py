"""Background tasks (django-tasks, run by `manage.py db_worker`)."""

from __future__ import annotations

from typing import Any

from django_tasks import task

__all__ = ["run_compaction_job"]


@task()
def run_compaction_job(job_id: str) -> dict[str, Any]:
    """Run the queued CompactionJob `job_id` (see sessions_app.services.jobs.run_job)."""
    from .services.jobs import run_job  # lazy: services.jobs imports this module

    return run_job(job_id)
