"""Issue 15's "truth on the page" and admin points in a real browser: the agent's reported
usage beside ctxweb's count, signed percentages, singular counts, a dry run with nothing to
do shown as a warning (not blue information), and the admin's profile and summarizer forms
(sections named for what they do, percentages, steps from a list, refusals on the field)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import PASSWORD, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

MINUS = "\u2212"


def test_reported_usage_signed_percentages_and_singular_counts(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    from sessions_app.models import Compaction, Session

    session = browser_session.session
    Session.objects.filter(pk=session.pk).update(
        last_usage={"input_tokens": 47_000, "output_tokens": 600}
    )
    Compaction.objects.filter(pk=browser_session.outer.pk).update(
        tokens_before=100, tokens_after=218
    )
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    source = page.locator("[data-gauge-source]")
    source.wait_for()
    text = source.inner_text()
    assert "ctxweb's own token count" in text
    assert page.locator("[data-reported-total='47600']").inner_text() == "47.6k"
    marker = page.locator(f"[data-compaction='{browser_session.outer.number}']").first
    assert "(+118%)" in marker.inner_text()
    assert f"({MINUS}0%)" not in page.locator("#history").inner_text()
    Session.objects.filter(pk=session.pk).update(message_count=1, context_entry_count=1)
    page.reload()
    body = page.locator("body").inner_text()
    assert re.search(r"\b1 message\b", body)
    assert not re.search(r"\b1 messages\b", body)
    assert not re.search(r"\b1 entries\b", body)


def test_an_empty_compaction_is_never_a_green_success(
    page: Any, live_server: Any, browser_user: Any
) -> None:
    from sessions_app.models import CompactionJob
    from sessions_app.services.background.jobs import run_job
    from sessions_app.services.sessions.lifecycle import create_session
    from tests.sessions_app.conftest_ui import ui_profile
    from tests.support.histories import assistant, system, user

    session = create_session(
        browser_user, messages=[system(), user("hi"), assistant("hello")], profile=ui_profile()
    )
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.click("#preview-button")
    preview = page.locator("#compact-preview-output .notice")
    preview.wait_for()
    assert "Nothing to compact" in preview.inner_text()
    assert page.locator("#compact-preview-output .notice-success").count() == 0
    page.click("#compact-button")
    page.locator("#compact-job-output .job").wait_for()
    run_job(str(CompactionJob.objects.get(session=session).pk))
    page.locator("#compact-job-output .job[data-job-status='succeeded']").wait_for()
    wait_for_htmx_idle(page)
    job = page.locator("#compact-job-output .job")
    assert job.locator(".badge.status-succeeded").count() == 0
    assert "Nothing was compacted" in job.locator(".notice-warning").inner_text()


@pytest.fixture
def admin_page(page: Any, live_server: Any, transactional_db: Any) -> Any:
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("admin", "", PASSWORD)
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    return page


def test_the_profile_form_speaks_percentages_steps_and_units(
    admin_page: Any, live_server: Any
) -> None:
    from sessions_app.models import CompactionProfile
    from tests.sessions_app.conftest_ui import ui_profile

    profile = ui_profile()
    page = admin_page
    page.goto(f"{live_server.url}/admin/sessions_app/compactionprofile/{profile.pk}/change/")
    titles = page.locator("fieldset h2").all_inner_texts()
    assert "When to compact" in " ".join(titles)
    trigger = page.locator("#id_trigger_ratio")
    assert trigger.input_value() == "90"  # 0.9 shown as a percentage
    assert "% of the context limit" in page.locator(".field-trigger_ratio").inner_text()
    assert "Tokens" in page.locator(".field-context_limit").inner_text()
    steps = page.locator("input[name=steps][type=checkbox]")
    assert steps.count() >= 4
    trigger.fill("75")
    page.click("input[name=_save]")
    page.wait_for_url(f"{live_server.url}/admin/sessions_app/compactionprofile/")
    assert CompactionProfile.objects.get(pk=profile.pk).trigger_ratio == pytest.approx(0.75)
    page.goto(f"{live_server.url}/admin/sessions_app/compactionprofile/{profile.pk}/change/")
    page.locator("#id_trigger_ratio").fill("150")
    page.click("input[name=_save]")
    error = page.locator(".field-trigger_ratio .errorlist")
    error.wait_for()
    assert "percentage" in error.inner_text()


def test_a_summarizer_that_cannot_work_is_refused_where_it_is_edited(
    admin_page: Any, live_server: Any
) -> None:
    from sessions_app.models import SummarizerConfig

    page = admin_page
    page.goto(f"{live_server.url}/admin/sessions_app/summarizerconfig/add/")
    page.fill("#id_name", "fast")
    page.select_option("#id_provider", "openai")
    page.fill("#id_model", "")
    page.click("input[name=_save]")
    error = page.locator(".field-model .errorlist")
    error.wait_for()
    assert "needs a model name" in error.inner_text()
    assert not SummarizerConfig.objects.exists()
