"""Edit before apply: the dry-run preview's proposed summary, edited and applied."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction
from sessions_app.services.compacting.session_compaction import CALLER_SUMMARIZER

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

PROPOSED = "Proposed summary: the CLI uses the new parser."
EDITED = "Edited summary: the CLI uses the new parser; keep src/cli_3.py in mind."


@pytest.fixture
def immediate_tasks(settings: Any) -> None:
    """Background jobs run at once, inside the request (django-tasks' ImmediateBackend)."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


def test_preview_offers_the_proposed_summary_to_edit(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=PROPOSED)
    url = reverse("ui:compact_preview", args=[ui_session.session.pk])
    html = logged_in.post(url, {"profile": ""}, HTTP_HX_REQUEST="true").content.decode()
    start = html.index('<textarea name="summary" id="preview-summary-edit"')
    assert PROPOSED in html[start : html.index("</textarea>", start)]
    button = html[html.index('id="apply-summary-button"') :]
    compact = reverse("ui:compact", args=[ui_session.session.pk])
    assert f'hx-post="{compact}"' in button[: button.index(">")]
    assert 'hx-include="#compact-form, #preview-summary-edit"' in button[: button.index(">")]


def test_applying_an_edited_summary_stores_it(
    ui_session: UiSession, logged_in: Client, scripted: Any, immediate_tasks: None
) -> None:
    summarizer = scripted(default=PROPOSED)
    session = ui_session.session
    response = logged_in.post(
        reverse("ui:compact", args=[session.pk]),
        {"profile": "", "instructions": "", "summary": f"  {EDITED}\n"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-job-status="succeeded"' in html
    newest = Compaction.objects.filter(session=session).order_by("-number").first()
    assert newest is not None
    assert newest.number == 3
    assert newest.status == Compaction.Status.SUCCEEDED
    assert newest.summary == EDITED
    assert newest.summarizer == CALLER_SUMMARIZER
    assert not summarizer.requests  # the person's text, no summarizer call


@pytest.mark.parametrize("summary", ["", "   \n "])
def test_an_empty_edited_summary_is_refused(
    ui_session: UiSession, logged_in: Client, summary: str, immediate_tasks: None
) -> None:
    session = ui_session.session
    before = Compaction.objects.filter(session=session).count()
    response = logged_in.post(
        reverse("ui:compact", args=[session.pk]), {"summary": summary}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 422
    assert b"summary" in response.content
    assert Compaction.objects.filter(session=session).count() == before


def test_a_too_long_summary_is_refused(ui_session: UiSession, logged_in: Client) -> None:
    response = logged_in.post(
        reverse("ui:compact", args=[ui_session.session.pk]),
        {"summary": "x" * 100_001},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 422
    assert b"summary" in response.content
