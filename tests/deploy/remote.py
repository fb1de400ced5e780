"""Functions the deployment tests call inside `manage.py shell` (see conftest.shell_call).

They run against the subprocess's own database (DATABASE_URL) and return plain JSON.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.contrib.auth import get_user_model
from django_tasks_db.models import DBTaskResult

from sessions_app.models import ApiKey, CompactionJob, Session
from sessions_app.services.background.jobs import enqueue_compaction
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import synthetic_history

from .integrity import session_problems

__all__ = ["job_report", "seed_jobs", "seed_user", "session_family", "sessions_report"]


def seed_user(username: str = "loadtest") -> dict[str, Any]:
    """A user with an API key; returns the plain key."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    _, key = ApiKey.issue(user, "deploy test")
    return {"user": user.pk, "key": key}


def seed_jobs(
    sessions: int, jobs_per_session: int, messages: int = 60, context_limit: int = 2000
) -> dict[str, Any]:
    """`sessions` sessions of `messages` messages, each with `jobs_per_session` queued jobs.

    The small context limit makes every session well over its compaction threshold.
    """
    user, _ = get_user_model().objects.get_or_create(username="workers")
    session_ids, job_ids = [], []
    for index in range(sessions):
        history = synthetic_history(messages, words_per_message=80, seed=index)
        session = create_session(
            user, title=f"worker test {index}", messages=history, context_limit=context_limit
        )
        session_ids.append(str(session.pk))
        for _ in range(jobs_per_session):
            job = enqueue_compaction(session, params={"trigger": "manual"})
            job_ids.append(str(job.pk))
    return {"sessions": session_ids, "jobs": job_ids, "messages": len(history)}


def job_report() -> dict[str, Any]:
    """Every job with its task result: status, attempts, workers that ran it."""
    tasks = {
        str(row.id).replace("-", ""): row
        for row in DBTaskResult.objects.filter(task_path__endswith="run_compaction_job")
    }
    jobs = []
    for job in CompactionJob.objects.all():
        task = tasks.get(job.task_id.replace("-", ""))
        jobs.append(
            {
                "id": str(job.pk),
                "session": str(job.session_id),
                "status": job.status,
                "attempts": job.attempts,
                "error": job.error,
                "phase": job.phase,
                "phases": [event.get("phase") for event in job.events],
                "compaction": job.compaction_id,
                "task_status": task.status if task else None,
                "workers": list(task.worker_ids) if task else [],
                "return_value": task.return_value if task else None,
            }
        )
    statuses = Counter(row.status for row in tasks.values())
    return {"jobs": jobs, "task_results": len(tasks), "task_statuses": dict(statuses)}


def sessions_report(expected_messages: int | None = None) -> dict[str, list[str]]:
    """Problems of every stored session (see integrity.session_problems)."""
    return {
        str(session.pk): session_problems(session, expected_messages=expected_messages)
        for session in Session.objects.all()
    }


def session_family() -> list[dict[str, Any]]:
    """Every session's title, its parent's title and the tool call that started it."""
    return [
        {
            "title": session.title,
            "parent": session.parent.title if session.parent else None,
            "tool_use_id": session.parent_tool_use_id,
        }
        for session in Session.objects.select_related("parent").order_by("created_at")
    ]


def pending_jobs() -> int:
    """Jobs not finished yet."""
    return CompactionJob.objects.filter(status__in=["queued", "running"]).count()


def final_report(expected_messages: int | None = None) -> dict[str, Any]:
    """job_report and sessions_report in one go (one subprocess start fewer)."""
    return {**job_report(), "sessions": sessions_report(expected_messages)}
