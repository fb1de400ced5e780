"""The pages in a real browser: login, list, nested markers, compaction with live progress,
revert, keyboard use, and hostile content that stays inert."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from playwright.sync_api import Error as PlaywrightError

from .conftest import ARTIFACTS, SCRIPTED_SUMMARY, Watch, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]


def marker_button(number: int, which: str) -> str:
    """The Summary or Originals expander of marker `number` (not of markers nested in it)."""
    attribute = "[data-originals]" if which == "originals" else ":not([data-originals])"
    return f"#compaction-{number} > .marker-row button.expander{attribute}"


#: The element each tab's content starts with.
TAB_CONTENT = {
    "history": "#history",
    "compare": "#compare",
    "context": "#runtime-context",
    "log": "#compaction-log",
}


def open_session(page: Any, live_server: Any, session: Any) -> None:
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.session.pk}/")
    page.wait_for_selector("#history")


def test_login_then_list_then_session(page: Any, live_server: Any, browser_session: Any) -> None:
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url
    login(page, live_server.url)
    row = page.locator(f'tr[data-session="{browser_session.session.pk}"]')
    assert row.locator(".session-link").inner_text() == "Parser refactor"
    assert row.locator("svg.usage-bar").count() == 1
    page.fill("input[name=q]", "no-such-title")
    page.wait_for_selector("text=No session matches")
    page.fill("input[name=q]", "parser")
    row.locator(".session-link").click()
    page.wait_for_selector(".gauge-grid")
    assert page.locator("svg.timeline-chart .drop").count() == 2
    assert page.locator("#history-items > [data-compaction]").count() == 1


def test_expand_a_marker_and_the_one_nested_inside(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    open_session(page, live_server, browser_session)
    outer, inner = browser_session.outer.number, browser_session.inner.number
    button = page.locator(marker_button(outer, "originals"))
    assert button.get_attribute("aria-expanded") == "false"
    button.click()
    assert button.get_attribute("aria-expanded") == "true"
    nested = page.locator(f"#c{outer}-originals [data-compaction='{inner}']")
    nested.wait_for()
    page.locator(marker_button(inner, "originals")).click()
    first = page.locator(
        f"#c{inner}-originals article[data-seq='{browser_session.inner.first_seq}']"
    )
    first.wait_for()
    assert "Please handle task 1" in first.inner_text()
    # Closing hides without refetching; reopening shows the same content.
    button.click()
    assert button.get_attribute("aria-expanded") == "false"
    assert not page.locator(f"#c{outer}-originals").is_visible()
    button.click()
    assert first.is_visible()


def test_expand_all_unfolds_every_level_and_collapse_all_folds_them(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    open_session(page, live_server, browser_session)
    page.click("[data-expand-all]")
    inner = browser_session.inner.number
    page.locator(f"#c{inner}-originals article[data-seq='1']").wait_for()
    page.locator(f"#c{inner}-summary .summary-text").wait_for()
    wait_for_htmx_idle(page)  # every region loaded, and every expander inside it opened
    closed = page.locator(
        "#history button.expander[aria-expanded='false']:not([data-no-expand-all])"
    )
    assert closed.count() == 0
    assert page.locator("#history .tool-detail:visible").count() >= 5
    page.click("[data-collapse-all]")
    assert page.locator("#history button.expander[aria-expanded='true']").count() == 0
    assert not page.locator(f"#c{browser_session.outer.number}-originals").is_visible()


def test_keyboard_opens_expanders_and_moves_between_tabs(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    open_session(page, live_server, browser_session)
    summary = page.locator(marker_button(browser_session.outer.number, "summary"))
    summary.focus()
    page.keyboard.press("Enter")
    page.locator(f"#c{browser_session.outer.number}-summary .summary-text").wait_for()
    assert summary.get_attribute("aria-expanded") == "true"
    page.keyboard.press("Space")
    assert summary.get_attribute("aria-expanded") == "false"
    page.locator("#tab-history").focus()
    page.keyboard.press("ArrowRight")
    page.locator("#compare").wait_for()
    assert page.locator("#tab-compare").get_attribute("aria-selected") == "true"
    assert "tab=compare" in page.url
    page.keyboard.press("ArrowRight")
    page.locator("#runtime-context").wait_for()
    assert '"system": "You are a careful coding agent."' in page.inner_text("#context-json")


def test_compact_with_preview_watch_progress_then_revert(
    page: Any, live_server: Any, browser_session: Any, scripted_summaries: None, watch: Watch
) -> None:
    from sessions_app.models import CompactionJob
    from sessions_app.services.background.jobs import run_job

    open_session(page, live_server, browser_session)
    page.fill("#compact-instructions", "keep the CLI file names")
    page.click("#preview-button")
    preview = page.locator("#compact-preview")
    preview.wait_for()
    assert "Would be summarized" in preview.inner_text()
    assert CompactionJob.objects.count() == 0
    page.click("#commit-button")
    job_box = page.locator(".job")
    job_box.wait_for()
    assert job_box.get_attribute("data-job-status") == "queued"
    assert job_box.get_attribute("hx-trigger") == "every 1s"
    # The worker runs the job while the page polls it.
    job = CompactionJob.objects.get()
    run_job(str(job.pk))
    page.wait_for_selector(".job[data-job-status='succeeded']")
    assert page.locator(".job").get_attribute("hx-trigger") is None  # polling stopped
    assert page.locator(".phase-done[data-phase='done']").count() == 1
    # The page updated in place: the new marker at the top, #2 nested in it, fresh stats.
    page.wait_for_selector("#history-items > [data-compaction='3']")
    assert page.locator("#history-items > [data-compaction='2']").count() == 0
    page.wait_for_selector(".timeline-chart .drop >> nth=2")
    page.locator(marker_button(3, "summary")).click()
    page.locator("#c3-summary .summary-text").wait_for()
    assert SCRIPTED_SUMMARY in page.inner_text("#c3-summary")
    assert "keep the CLI file names" in page.inner_text("#c3-summary")
    # Revert it from the compaction log.
    page.click("#tab-log")
    page.locator("[data-compaction-log='3'] button.danger").click()
    page.wait_for_selector("#notices .notice-success")
    assert any(d.startswith("confirm: Revert compaction #3") for d in watch.dialogs)
    page.wait_for_selector("[data-compaction-log='3'] .status-reverted")
    page.click("#tab-history")
    page.wait_for_selector("#history-items > [data-compaction='2']")
    assert page.locator("#history-items > [data-compaction='3']").count() == 0


def test_hostile_content_stays_inert(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    open_session(page, live_server, browser_session)
    outer, inner = browser_session.outer.number, browser_session.inner.number
    page.click("[data-expand-all]")
    page.locator(f"#c{inner}-originals article[data-seq='1']").wait_for()
    page.locator(f"#c{outer}-originals article[data-seq='13']").wait_for()
    page.locator(f"#c{outer}-summary .summary-text").wait_for()
    wait_for_htmx_idle(page)  # everything "expand all" opens is on the page
    # The hostile text is on screen, as text.
    hostile_message = page.locator(f"#c{outer}-originals article[data-seq='13']")
    assert "<script>window.__pwned = 1" in hostile_message.inner_text()
    assert "<img src=x onerror=" in page.inner_text(f"#c{outer}-summary")
    tool = page.locator(f"#c{outer}-originals .block.tool.is-error")
    assert "Traceback: boom <script>" in tool.inner_text()
    for tab in ("compare", "context", "log"):
        page.click(f"#tab-{tab}")
        page.wait_for_selector(f"#tab-{tab}[aria-selected='true']")
        page.wait_for_selector(f"#tab-panel > {TAB_CONTENT[tab]}")
        assert f"tab={tab}" in page.url
    page.click("#tab-compare")
    page.wait_for_selector("#tab-panel > #compare")
    wait_for_htmx_idle(page)
    page.wait_for_timeout(300)
    assert page.locator("#compare").is_visible()
    assert "tab=compare" in page.url
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert page.locator("#tab-panel script, #history script").count() == 0
    assert watch.dialogs == []
    assert not [url for url in watch.requests if "hx-attack" in url]
    assert watch.errors == []


def test_a_late_answer_for_a_tab_left_behind_never_replaces_the_chosen_tab(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    """Two tab loads in flight: the one asked for last fills the panel and the URL, whatever
    order the answers come back in (here the first one is held back until the second shows)."""
    open_session(page, live_server, browser_session)
    page.evaluate(
        """() => {
          window.__panelLoads = [];
          document.body.addEventListener("htmx:afterRequest", (event) => {
            window.__panelLoads.push(event.detail.pathInfo.requestPath);
          });
        }"""
    )
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route("**/tabs/log/", hold)
    page.click("#tab-log")
    page.click("#tab-compare")
    page.wait_for_selector("#tab-panel > #compare")
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    page.unroute("**/tabs/log/")
    with contextlib.suppress(PlaywrightError):  # the page may have aborted it already
        held[0].continue_()
    page.wait_for_function("() => window.__panelLoads.some((p) => p.endsWith('/tabs/log/'))")
    wait_for_htmx_idle(page)
    assert page.locator("#tab-panel > #compare").is_visible()
    assert page.locator("#compaction-log").count() == 0
    assert page.locator("#tab-compare").get_attribute("aria-selected") == "true"
    assert page.url.endswith("?tab=compare")


def test_reload_after_a_change_keeps_the_open_tab_its_options_and_its_url(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    open_session(page, live_server, browser_session)
    page.click("#tab-context")
    page.click("#runtime-context button:has-text('OpenAI')")
    page.wait_for_selector("#runtime-context button[aria-pressed='true']:has-text('OpenAI')")
    history_length = page.evaluate("history.length")
    page.evaluate("htmx.trigger(document.body, 'session-changed')")
    page.wait_for_function(
        "() => performance.getEntriesByType('resource')"
        ".filter((e) => e.name.includes('/tabs/context/')).length === 3"
    )
    wait_for_htmx_idle(page)
    assert page.locator("#runtime-context button[aria-pressed='true']").inner_text() == "OpenAI"
    assert '"role": "system"' in page.inner_text("#context-json")  # the OpenAI shape
    assert page.url.endswith("?tab=context&format=openai")
    assert page.evaluate("history.length") == history_length  # a reload is no new entry
    # A tab load still in flight when the session changes is asked again, URL push included.
    held: list[Any] = []

    def hold_first(route: Any) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route("**/tabs/compare/", hold_first)
    page.click("#tab-compare")
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    page.evaluate("htmx.trigger(document.body, 'session-changed')")
    page.wait_for_selector("#tab-panel > #compare")
    with contextlib.suppress(PlaywrightError):  # the page has aborted it
        held[0].continue_()
    wait_for_htmx_idle(page)
    assert page.url.endswith("?tab=compare")
    assert len([url for url in watch.requests if "/tabs/compare/" in url]) == 2


def test_screenshot_for_the_readme(page: Any, live_server: Any, browser_session: Any) -> None:
    """A view of a nested marker open, its summary and a tool call: test-artifacts/
    session-page.png (docs/screenshot.png is the same view of a longer demo session)."""
    open_session(page, live_server, browser_session)
    outer, inner = browser_session.outer.number, browser_session.inner.number
    page.locator(marker_button(outer, "originals")).click()
    page.locator(f"#c{outer}-originals [data-compaction='{inner}']").wait_for()
    page.locator(marker_button(inner, "summary")).click()
    page.locator(f"#c{inner}-summary .summary-text").wait_for()
    page.locator(f"#c{outer}-originals .block.tool.is-error button").click()
    page.set_viewport_size({"width": 1440, "height": 1180})
    page.evaluate("window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "session-page.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
