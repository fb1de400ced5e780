"""Compact now is not queued twice: while a job of the session is queued or running, another
request queues nothing and says so beside that job's progress."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import CompactionJob

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def test_a_second_compact_now_queues_nothing_and_says_so(
    ui_session: UiSession, logged_in: Client
) -> None:
    session = ui_session.session
    url = reverse("ui:compact", args=[session.pk])
    first = logged_in.post(url, {"profile": ""}, HTTP_HX_REQUEST="true")
    assert first.status_code == 200
    assert b"data-coalesced" not in first.content
    job = CompactionJob.objects.get(session=session)
    assert job.status == CompactionJob.Status.QUEUED  # the database backend: not run yet
    for _ in range(3):  # a double click, a script
        again = logged_in.post(url, {"profile": "", "summary": "mine"}, HTTP_HX_REQUEST="true")
        html = again.content.decode()
        assert again.status_code == 200
        assert "data-coalesced" in html
        assert "already queued: nothing more was queued" in html
        assert f'id="job-{job.pk}"' in html
    assert CompactionJob.objects.filter(session=session).count() == 1
    # Once the job is done, a new request queues a new one.
    CompactionJob.objects.filter(pk=job.pk).update(status=CompactionJob.Status.SUCCEEDED)
    later = logged_in.post(url, {"profile": ""}, HTTP_HX_REQUEST="true")
    assert b"data-coalesced" not in later.content
    assert CompactionJob.objects.filter(session=session).count() == 2


def test_the_buttons_are_disabled_while_their_request_is_in_flight(
    ui_session: UiSession, logged_in: Client
) -> None:
    page = logged_in.get(reverse("ui:session", args=[ui_session.session.pk])).content.decode()
    assert 'id="compact-button" hx-disabled-elt="this"' in page
