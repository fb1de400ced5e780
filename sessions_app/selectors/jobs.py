"""Background compaction jobs, scoped to the caller's sessions."""

from __future__ import annotations

import uuid

from sessions_app.models import CompactionJob, Session
from sessions_app.services.errors import NotFound

from .sessions import Owner, owned_sessions

__all__ = ["owned_job", "session_job"]


def _key(job_id: uuid.UUID | str) -> uuid.UUID:
    try:
        return job_id if isinstance(job_id, uuid.UUID) else uuid.UUID(str(job_id))
    except ValueError:
        raise NotFound("no such job") from None


def owned_job(user: Owner, job_id: uuid.UUID | str) -> CompactionJob:
    """A job of one of `user`'s sessions, with its compaction; NotFound otherwise."""
    job = (
        CompactionJob.objects.select_related("compaction")
        .filter(pk=_key(job_id), session__in=owned_sessions(user))
        .first()
    )
    if job is None:
        raise NotFound("no such job")
    return job


def session_job(session: Session, job_id: uuid.UUID | str) -> CompactionJob:
    """Job `job_id` of `session` (with its compaction); NotFound when it is another's."""
    job = (
        CompactionJob.objects.select_related("compaction")
        .filter(pk=_key(job_id), session=session)
        .first()
    )
    if job is None:
        raise NotFound("no such job")
    return job
