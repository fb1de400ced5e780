"""Issue 15's last points in a real browser: the threshold drawn over the time it applied,
offloads in the compaction log with their files and an undo, Compact now queued once, the
nested compaction's before/after view and the admin's file view tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import ARTIFACTS, PASSWORD, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

BIG_OUTPUT = "a long line of tool output\n" * 40


@pytest.fixture
def tab(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page that accepts every confirmation (the page fixture accepts only reverts)."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    finally:
        context.close()


def with_big_result(session: Any) -> None:
    from sessions_app.services.sessions.lifecycle import append_messages
    from tests.support.histories import assistant, exchange, user

    append_messages(
        session,
        [user("Show me the log."), *exchange("toolu_big", "Bash", {}, BIG_OUTPUT), assistant("ok")],
    )


def test_the_timeline_draws_each_threshold_over_the_time_it_applied(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    from sessions_app.models import Compaction, CompactionProfile

    # #1 ran under a lower threshold; the profile has changed since #2 ran.
    Compaction.objects.filter(pk=browser_session.inner.pk).update(threshold_tokens=3000)
    CompactionProfile.objects.filter(name="ui-test").update(trigger_ratio=0.8)
    recorded = Compaction.objects.get(pk=browser_session.outer.pk).threshold_tokens
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    lines = page.locator(".timeline-chart line.threshold-line")
    lines.first.wait_for(state="attached")
    assert [int(v) for v in lines.evaluate_all("ls => ls.map(l => l.dataset.threshold)")] == [
        3000,
        recorded,
        4800,
    ]
    spans = lines.evaluate_all(
        "ls => ls.map(l => [l.x1.baseVal.value, l.x2.baseVal.value, l.y1.baseVal.value])"
    )
    assert spans[0][1] == spans[1][0], "one line, in steps"
    assert spans[1][1] == spans[2][0], "one line, in steps"
    assert recorded == 5400
    assert spans[0][2] > spans[2][2] > spans[1][2], "higher thresholds are drawn higher"
    titles = lines.evaluate_all("ls => ls.map(l => l.querySelector('title').textContent)")
    assert titles[0] == "Compaction threshold 3,000 tokens, in force for compaction #1"
    assert titles[1].endswith("in force for compaction #2")
    assert titles[2] == "Compaction threshold 4,800 tokens: the current profile's"
    label = page.locator("svg.timeline-chart").get_attribute("aria-label")
    assert "Compaction threshold 3,000 tokens" in label
    assert page.locator(".timeline-chart .threshold-step").count() == 2
    assert "as in force at each compaction" in page.locator(".chart-legend").inner_text()


def test_an_offload_is_in_the_log_with_its_files_and_can_be_undone(
    tab: Any, live_server: Any, browser_session: Any
) -> None:
    from sessions_app.models import Compaction
    from sessions_app.services.context.runtime import runtime_messages

    session = browser_session.session
    with_big_result(session)
    before = runtime_messages(session)
    login(tab, live_server.url)
    tab.goto(f"{live_server.url}/sessions/{session.pk}/")
    tab.fill("#offload-min", "500")
    tab.click("text=Offload large tool results")
    notice = tab.locator("#offload-output .notice-success")
    notice.wait_for()
    record = Compaction.objects.get(session=session, strategy="offload")
    assert f"Recorded as #{record.number}" in notice.inner_text()
    wait_for_htmx_idle(tab)
    tab.click("#tab-log")
    row = tab.locator(f"#log-{record.number}[data-offload]")
    row.wait_for()
    link = row.locator("a[data-offload-file='tool-result-toolu_big.md']")
    assert link.is_visible()
    assert "KB" in row.inner_text() or "bytes" in row.inner_text()
    response = tab.request.get(f"{live_server.url}{link.get_attribute('href')}")
    assert response.ok
    assert response.text() == BIG_OUTPUT
    assert row.locator("text=Before / after").count() == 0
    # Undo: confirmed, then the tab reloads in place with the record undone.
    row.locator("[data-undo-offload]").click()
    tab.locator("#notices .notice-success").wait_for()
    assert "Undid offload" in tab.locator("#notices").inner_text()
    tab.wait_for_selector(f"#log-{record.number}.status-reverted")
    wait_for_htmx_idle(tab)
    assert tab.locator("[data-undo-offload]").count() == 0
    assert runtime_messages(session) == before


def test_compact_now_queues_one_job_however_often_it_is_clicked(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    from sessions_app.models import CompactionJob

    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    button = page.locator("#compact-button")
    button.dblclick()
    page.locator("#compact-job-output .job").wait_for()
    wait_for_htmx_idle(page)
    button.click()  # the job is still queued (no worker runs in this test)
    page.locator("#compact-job-output [data-coalesced]").wait_for()
    text = page.locator("#compact-job-output").inner_text()
    assert "already queued: nothing more was queued" in text
    assert CompactionJob.objects.filter(session=browser_session.session).count() == 1


def test_the_nested_compactions_before_and_after(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    from tests.sessions_app.conftest_ui import FIRST_SUMMARY

    login(page, live_server.url)
    outer = browser_session.outer.number
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/?tab=log")
    row = page.locator(f"#log-{outer}")
    row.wait_for()
    row.locator("button", has_text="Before / after").click()
    panel = page.locator(f"#log{outer}-compare .before-after")
    panel.wait_for()
    wait_for_htmx_idle(page)
    before, after = panel.locator(".ba-col").nth(0), panel.locator(".ba-col").nth(1)
    # Before: the entries #2 replaced, among them #1's summary (the nesting).
    assert FIRST_SUMMARY[:40] in before.inner_text()
    assert "Second summary keeps the first one." in after.inner_text()
    assert page.evaluate("window.__pwned") is None  # the hostile summary stays text
    assert panel.is_visible()


def test_the_admin_edits_file_view_tools_one_per_line(
    page: Any, live_server: Any, transactional_db: Any
) -> None:
    from django.contrib.auth import get_user_model

    from tests.sessions_app.conftest_ui import ui_profile

    get_user_model().objects.create_superuser("admin", "", PASSWORD)
    profile = ui_profile()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.goto(f"{live_server.url}/admin/sessions_app/compactionprofile/{profile.pk}/change/")
    field = page.locator("textarea#id_file_view_tools")
    field.wait_for()
    assert "one per line" in page.locator(".field-file_view_tools").inner_text()
    field.fill("Read\nmcp__fs__read_file, view")
    page.click("input[name=_save]")
    page.wait_for_url(f"{live_server.url}/admin/sessions_app/compactionprofile/")
    profile.refresh_from_db()
    assert profile.file_view_tools == ["Read", "mcp__fs__read_file", "view"]
    page.goto(f"{live_server.url}/admin/sessions_app/compactionprofile/{profile.pk}/change/")
    page.locator("textarea#id_file_view_tools").fill("read file")
    page.click("input[name=_save]")
    error = page.locator(".field-file_view_tools .errorlist")
    error.wait_for()
    assert "Not a tool name: 'read file'" in error.inner_text()


def test_a_late_preview_never_replaces_the_running_job(
    page: Any, live_server: Any, browser_session: Any, scripted_summaries: None
) -> None:
    from sessions_app.models import CompactionJob
    from sessions_app.services.background.jobs import run_job

    held: list[Any] = []
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    page.locator("#history").wait_for()
    page.route("**/compact/preview/", lambda route: held.append(route))
    page.click("#preview-button")
    page.click("#compact-button")
    page.locator("#compact-job-output .job").wait_for()
    assert held, "the preview request is held back"
    held[0].continue_()  # the preview answers late, after the job started
    wait_for_htmx_idle(page)
    assert page.locator("#compact-job-output .job").count() == 1
    assert page.locator("#compact-job-output #compact-preview").count() == 0
    job = CompactionJob.objects.get()
    run_job(str(job.pk))
    page.wait_for_selector("#compact-job-output .job[data-job-status='succeeded']")
    wait_for_htmx_idle(page)
    assert page.locator("#compact-job-output .job").count() == 1
    job.refresh_from_db()
    assert job.compaction is not None
    link = page.locator(f"#compact-job-output [data-compaction-link='{job.compaction.number}']")
    assert link.get_attribute("href") == f"?tab=history#compaction-{job.compaction.number}"
