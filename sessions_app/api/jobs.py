"""`GET /api/jobs/{id}`: a background compaction's status, phase, events and error."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpRequest
from ninja import Router

from ..models import CompactionJob
from ..services.sessions import sessions_for
from .common import errors, user_of
from .schemas import JobOut
from .serializers import job_dict

router = Router(tags=["jobs"])


@router.get("/{job_id}", response={200: JobOut, **errors()})
def read_job(request: HttpRequest, job_id: str) -> dict[str, Any]:
    """A job of one of the caller's sessions (another owner's job is a 404)."""
    try:
        key = uuid.UUID(job_id)
    except ValueError:
        raise Http404("no such job") from None
    job = (
        CompactionJob.objects.select_related("compaction")
        .filter(pk=key, session__in=sessions_for(user_of(request)))
        .first()
    )
    if job is None:
        raise Http404("no such job")
    return job_dict(job)
