"""In a real browser: a failed attempt is a red marker in the history, with its error; and
the dry-run preview's proposed summary can be edited and applied."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import SCRIPTED_SUMMARY, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

EDITED = "Edited in the browser: the CLI uses the new parser; src/cli_3.py still open."


def test_a_failed_attempt_is_a_red_marker_in_the_history(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    from django.utils import timezone

    from sessions_app.models import Compaction

    session = browser_session.session
    Compaction.objects.create(
        session=session,
        number=3,
        created_at=timezone.now(),
        trigger=Compaction.Trigger.MANUAL,
        status=Compaction.Status.FAILED,
        failure_reason="summarizer_error",
        details={"error": {"type": "SummaryError", "message": "overloaded", "status": 503}},
    )
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/#compaction-3")
    marker = page.locator("#history #compaction-3.marker-failed")
    marker.wait_for()
    text = marker.inner_text()
    assert "failed" in text
    assert "summarizer_error" in text
    assert "HTTP 503" in text
    assert "overloaded" in text
    assert marker.locator("button").count() == 0
    colours = page.evaluate(
        """() => {
          const failed = getComputedStyle(document.getElementById('compaction-3'));
          const good = getComputedStyle(document.querySelector('.marker:not(.marker-failed)'));
          return [failed.borderTopColor, good.borderTopColor];
        }"""
    )
    assert colours[0] != colours[1]


def test_edit_the_proposed_summary_and_apply_it(
    page: Any, live_server: Any, browser_session: Any, scripted_summaries: None
) -> None:
    from sessions_app.models import Compaction, CompactionJob
    from sessions_app.services.background.jobs import run_job

    session = browser_session.session
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#history")
    page.click("#preview-button")
    editor = page.locator("#preview-summary-edit")
    editor.wait_for()
    assert SCRIPTED_SUMMARY in editor.input_value()
    editor.fill(EDITED)
    page.click("#apply-summary-button")
    page.locator("#compact-job-output .job").wait_for()
    run_job(str(CompactionJob.objects.get().pk))
    page.locator("#compact-job-output .job[data-job-status='succeeded']").wait_for()
    wait_for_htmx_idle(page)
    newest = Compaction.objects.filter(session=session).order_by("-number").first()
    assert newest is not None
    assert newest.summary == EDITED
    assert newest.summarizer == "caller"
