"""`GET /api/jobs/{id}`: a background compaction's status, phase, events and error."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from ..selectors.jobs import owned_job
from .common import errors, user_of
from .schemas import JobOut
from .serializers import job_dict

router = Router(tags=["jobs"])


@router.get("/{job_id}", response={200: JobOut, **errors()})
def read_job(request: HttpRequest, job_id: str) -> dict[str, Any]:
    """A job of one of the caller's sessions (another owner's job is a 404)."""
    return job_dict(owned_job(user_of(request), job_id))
