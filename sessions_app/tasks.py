"""Background tasks (django-tasks, run by `manage.py db_worker`).

The compaction task is defined beside its job logic, in sessions_app/services/background/jobs.py;
it is re-exported here because task rows queued before it moved name
`sessions_app.tasks.run_compaction_job` (this module imports only that one).
"""

from __future__ import annotations

from sessions_app.services.background.jobs import run_compaction_job

__all__ = ["run_compaction_job"]
