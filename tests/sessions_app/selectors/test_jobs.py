"""Jobs, scoped to the caller's sessions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sessions_app.models import CompactionJob
from sessions_app.selectors.jobs import owned_job, session_job
from sessions_app.services.errors import NotFound

pytestmark = pytest.mark.django_db


def test_a_job_of_another_owner_or_session_is_not_found(make_session: Any, other_user: Any) -> None:
    session = make_session()
    other = make_session()
    job = CompactionJob.objects.create(session=session)
    assert owned_job(session.owner, str(job.pk)) == job
    assert session_job(session, job.pk) == job
    for lookup in (
        lambda: owned_job(other_user, job.pk),
        lambda: owned_job(session.owner, "not-a-uuid"),
        lambda: owned_job(session.owner, uuid.uuid4()),
        lambda: session_job(other, job.pk),
    ):
        with pytest.raises(NotFound):
            lookup()
