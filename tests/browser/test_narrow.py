"""Phones and narrow windows: no page ever scrolls sideways from 360 px up, the actions are
reachable from the top, and at 1400 px the compaction log fits beside the actions panel."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

PHONE_WIDTHS = (390, 360)
#: Tablets and half-screen windows: one column, but the wide layout rules.
TABLET_WIDTHS = (768, 1024)
#: Pixels of the document outside the window, sideways (0 when nothing overflows).
OVERFLOW = "document.documentElement.scrollWidth - window.innerWidth"
#: What the page shows at the centre of an element: the element itself, or what covers it.
COVERED_BY = """(el) => {
  el.scrollIntoView({block: "center"});
  const box = el.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  if (hit && (hit === el || el.contains(hit))) { return ""; }
  return hit ? hit.outerHTML.slice(0, 120) : "nothing";
}"""


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    """A page in a phone-sized context; the width is set per test with `set_viewport_size`."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def assert_fits(page: Any, what: str) -> None:
    """The document is no wider than the window: no sideways page scroll."""
    wait_for_htmx_idle(page)
    overflow = page.evaluate(OVERFLOW)
    width = page.evaluate("window.innerWidth")
    if overflow > 0:
        widest = page.evaluate(
            """() => [...document.querySelectorAll('body *')]
                 .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                 .slice(-5).map(e => e.tagName + '.' + e.className)"""
        )
        pytest.fail(f"{what} at {width} px overflows by {overflow} px: {widest}")


def session_pages(session: Any) -> list[tuple[str, str]]:
    """Every page of a session: (what, path) for each tab."""
    base = f"/sessions/{session.pk}/"
    tabs = ("history", "compare", "context", "log")
    return [(f"session {tab}", f"{base}?tab={tab}") for tab in tabs]


def open_everything(page: Any) -> None:
    """Open every expander on the page (nested markers, tool rows, details, before/after)."""
    for _ in range(6):  # nesting: each round opens what the last one loaded
        closed = page.locator("button.expander[aria-expanded='false']:visible")
        if closed.count() == 0:
            return
        for index in range(closed.count() - 1, -1, -1):
            closed.nth(index).click()
        wait_for_htmx_idle(page)


@pytest.mark.parametrize("width", PHONE_WIDTHS + TABLET_WIDTHS)
def test_no_page_scrolls_sideways_on_a_phone(
    phone: Any, live_server: Any, browser_session: Any, width: int
) -> None:
    phone.set_viewport_size({"width": width, "height": 844})
    url = live_server.url
    phone.goto(f"{url}/accounts/login/")
    assert_fits(phone, "login")
    login(phone, url)
    assert_fits(phone, "sessions list")
    phone.click("button[aria-controls=upload-panel]")
    assert phone.locator("#upload-panel").is_visible()
    assert_fits(phone, "sessions list with the import form")
    phone.goto(f"{url}/sessions/{uuid.uuid4()}/")
    assert_fits(phone, "unknown session (404)")
    for what, path in session_pages(browser_session.session):
        phone.goto(f"{url}{path}")
        assert_fits(phone, what)
        open_everything(phone)
        assert_fits(phone, f"{what}, everything open")


@pytest.mark.parametrize("width", PHONE_WIDTHS)
def test_list_rows_are_cards_and_tables_scroll_in_their_own_box(
    phone: Any, live_server: Any, browser_session: Any, width: int
) -> None:
    phone.set_viewport_size({"width": width, "height": 844})
    login(phone, live_server.url)
    row = phone.locator(f'tr[data-session="{browser_session.session.pk}"]')
    usage = row.locator("svg.usage-bar")
    assert usage.is_visible()
    box = usage.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= width
    phone.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/?tab=log")
    log = phone.locator("#compaction-log")
    assert log.evaluate("(el) => el.getBoundingClientRect().right") <= width
    # The log's table may be wider than the phone: it scrolls inside its box, not the page.
    assert log.evaluate("(el) => getComputedStyle(el).overflowX") == "auto"


def test_actions_are_reachable_from_the_top_on_a_phone(
    phone: Any, live_server: Any, browser_session: Any
) -> None:
    login(phone, live_server.url)
    phone.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    phone.wait_for_selector("#history")
    jump = phone.locator("a.jump-to-actions")
    assert jump.is_visible()
    assert jump.evaluate("(el) => el.getBoundingClientRect().top") < 844
    jump.click()
    compact = phone.locator("#compact-button")
    compact.wait_for()
    top = compact.evaluate("(el) => el.getBoundingClientRect().top")
    assert 0 <= top < 844, top
    assert phone.evaluate(COVERED_BY, compact.element_handle()) == ""


def test_nested_markers_keep_their_buttons_on_screen(
    phone: Any, live_server: Any, browser_session: Any
) -> None:
    phone.set_viewport_size({"width": 360, "height": 800})
    login(phone, live_server.url)
    phone.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    phone.wait_for_selector("#history")
    open_everything(phone)
    inner = phone.locator(f"#compaction-{browser_session.inner.number} .marker-buttons").first
    inner.wait_for()
    box = inner.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= 360


def test_wide_log_fits_its_column_and_revert_is_not_covered(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    from sessions_app.models import Compaction

    # Real logs carry long model names; they must wrap rather than widen the table.
    Compaction.objects.filter(pk=browser_session.outer.pk).update(
        model="claude-sonnet-4-5-20250929-with-a-long-deployment-suffix"
    )
    page.set_viewport_size({"width": 1400, "height": 900})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/?tab=log")
    log = page.locator("#compaction-log")
    log.wait_for()
    main = page.locator(".session-main")
    assert log.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1"), "log wider than its box"
    log_right = log.evaluate("(el) => el.getBoundingClientRect().right")
    assert log_right <= main.evaluate("(el) => el.getBoundingClientRect().right") + 1
    revert = page.locator("[data-compaction-log] button.chip.danger").first
    assert revert.is_visible()
    assert page.evaluate(COVERED_BY, revert.element_handle()) == ""
    assert page.evaluate(OVERFLOW) <= 0


def test_tool_ids_are_shown_as_stored(page: Any, live_server: Any, browser_session: Any) -> None:
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/")
    page.wait_for_selector("#history")
    tool = page.locator("#history-items > article button.tool-line").first
    tool.click()
    label = page.locator(f"#{tool.get_attribute('aria-controls')} .io-label .mono").first
    stored = label.text_content().strip()
    assert stored
    assert stored != stored.upper()
    assert label.inner_text().strip() == stored  # what is painted, after CSS


def test_unknown_session_is_the_sites_404_page(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    login(page, live_server.url)
    response = page.goto(f"{live_server.url}/sessions/{uuid.uuid4()}/")
    assert response is not None
    assert response.status == 404
    assert page.locator("header.topbar").is_visible()
    assert page.locator("[data-status='404'] h1").inner_text() == "Not found"
    page.click("text=Back to the sessions")
    page.wait_for_url(f"{live_server.url}/")


@pytest.mark.parametrize("width", PHONE_WIDTHS)
def test_the_log_with_an_offload_the_files_failures_and_the_admin_fit_a_phone(
    phone: Any, live_server: Any, browser_session: Any, width: int
) -> None:
    from django.contrib.auth import get_user_model

    from sessions_app.models import Compaction
    from sessions_app.services.compacting.offloading import offload_session
    from sessions_app.services.sessions.lifecycle import append_messages
    from tests.support.histories import assistant, exchange, user

    from .conftest import PASSWORD

    session = browser_session.session
    long_name = "toolu_" + "a_very_long_tool_use_identifier_" * 3
    output = "a long line of tool output " * 200  # one line, no break
    append_messages(
        session, [user("log?"), *exchange(long_name, "Bash", {}, output), assistant(".")]
    )
    result = offload_session(session, min_chars=500)
    assert result.compaction is not None
    phone.set_viewport_size({"width": width, "height": 844})
    url = live_server.url
    login(phone, url)
    phone.goto(f"{url}/sessions/{session.pk}/?tab=log")
    phone.locator(f"#log-{result.compaction}[data-offload]").wait_for()
    assert_fits(phone, "log with an offload")
    open_everything(phone)
    assert_fits(phone, "log with an offload, everything open")
    phone.goto(f"{url}/sessions/{session.pk}/offloaded/{result.files[0]}")
    assert_fits(phone, "an offloaded file")
    # A refused action without htmx answers with the full failure page (409: #2 covers #1).
    phone.goto(f"{url}/sessions/{session.pk}/")
    phone.evaluate(
        """(action) => {
          const form = document.createElement("form");
          form.method = "post";
          form.action = action;
          const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
          form.innerHTML = `<input type="hidden" name="csrfmiddlewaretoken" value="${token}">`;
          document.body.append(form);
          form.submit();
        }""",
        f"/sessions/{session.pk}/compactions/{browser_session.inner.number}/revert/",
    )
    phone.wait_for_selector(".notice-error, [data-status]")
    assert_fits(phone, "the failure page")
    assert Compaction.objects.get(pk=browser_session.inner.pk).status == "succeeded"
    # The admin: its list and the profile form with every section's help text.
    get_user_model().objects.create_superuser("admin", "", PASSWORD)
    phone.context.clear_cookies()
    phone.goto(f"{url}/admin/login/")
    phone.fill("input[name=username]", "admin")
    phone.fill("input[name=password]", PASSWORD)
    phone.click("input[type=submit]")
    phone.wait_for_url(f"{url}/admin/")
    assert_fits(phone, "the admin")
    profile = session.profile
    phone.goto(f"{url}/admin/sessions_app/compactionprofile/{profile.pk}/change/")
    assert_fits(phone, "the admin's profile form")
    phone.goto(f"{url}/admin/sessions_app/compaction/")
    assert_fits(phone, "the admin's compactions")
