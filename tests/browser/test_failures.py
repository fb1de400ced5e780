"""Failures a person can understand, in a real browser: a failed compaction job marks the
phase that failed and shows the underlying error, the timeline marks the attempt in red,
and the job's link lands on the attempt's row in the compaction log."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]


class FailingFactory:
    """CTXWEB_SUMMARIZER_CLASS target: a summary model that answers HTTP 503."""

    def __new__(cls, profile: Any) -> Any:
        from compaction import ScriptedSummarizer, SummaryError

        error = SummaryError("api_error", "the model is overloaded", retryable=False, status=503)
        return ScriptedSummarizer(default=error)


@pytest.fixture
def failing_summaries(settings: Any) -> None:
    settings.CTXWEB_SUMMARIZER_CLASS = "tests.browser.test_failures.FailingFactory"


def test_a_failed_job_shows_its_phase_error_and_red_marker(
    page: Any, live_server: Any, browser_session: Any, failing_summaries: None
) -> None:
    from sessions_app.models import Compaction, CompactionJob
    from sessions_app.services.background.jobs import run_job

    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    page.wait_for_selector("#history")
    # The dry run already tells: an error, not blue information.
    page.click("#preview-button")
    notice = page.locator("#compact-preview-output .notice-error")
    notice.wait_for()
    assert "HTTP 503" in notice.inner_text()
    assert page.locator("#compact-preview-output .notice-info").count() == 0
    # The job goes into its own place; the stale preview is cleared.
    page.click("#compact-button")
    page.locator("#compact-job-output .job").wait_for()
    assert page.locator("#compact-preview-output > *").count() == 0
    run_job(str(CompactionJob.objects.get().pk))
    job = page.locator("#compact-job-output .job[data-job-status='failed']")
    job.wait_for()
    wait_for_htmx_idle(page)
    assert page.locator(".phase-failed").count() == 1
    assert page.locator(".phase-failed[data-phase='summary']").count() == 1
    assert page.locator(".phase-skipped[data-phase='selective']").count() == 1
    assert page.locator(".job .badge.status-succeeded").count() == 0
    assert "HTTP 503" in job.inner_text()
    assert "the model is overloaded" in job.inner_text()
    failed = Compaction.objects.get(status="failed")
    # The timeline marks the attempt in red where it ran.
    page.wait_for_selector(f".timeline-chart .drop-failed[data-drop='{failed.number}']")
    # The job's link lands on the attempt's row in the compaction log.
    page.click(f"[data-compaction-link='{failed.number}']")
    row = page.locator(f"#log-{failed.number}")
    row.wait_for()
    assert "tab=log" in page.url
    assert row.is_visible()
    assert "HTTP 503" in row.inner_text()
    box = row.bounding_box()
    assert box is not None
    assert 0 <= box["y"] < page.viewport_size["height"]
