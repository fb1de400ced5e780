"""Keep my place (issue 29 item 1): Back from a subagent's page, and a reload, bring back
the History tab's open markers, messages and tool rows and the scroll position."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.services.sessions.lifecycle import append_messages, create_session
from tests.support.histories import assistant, exchange, user

from .axe_check import assert_axe_clean
from .conftest import Watch, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

#: What is open in the History tab and where the page is scrolled.
_PLACE = """() => ({
  open: Array.from(document.querySelectorAll('#history button.expander[aria-expanded=true]'))
    .map(b => b.getAttribute('aria-controls')),
  markers: document.querySelectorAll('#history .marker > .originals-panel:not([hidden])').length,
  y: Math.round(window.scrollY),
})"""

#: True once place.js has put the place back (or had none to put back).
_SETTLED = "() => !document.documentElement.hasAttribute('data-place-restoring')"


@pytest.fixture
def family(browser_session: Any, browser_user: Any) -> Any:
    """carol's nested session with an `Agent` call that started a subagent session, then
    enough messages for the page to scroll well past it."""
    parent = browser_session.session
    messages = [
        user("Find where the parser is built."),
        *exchange("toolu_place_agent", "Agent", {"description": "Find the parser"}, "found"),
    ]
    for index in range(12):
        messages += exchange(
            f"toolu_place_{index}", "Read", {"file_path": f"src/mod_{index}.py"}, "y " * 60
        )
    messages.append(assistant("Done reading."))
    append_messages(parent, messages)
    create_session(
        browser_user,
        title="Find the parser",
        messages=[user("Find the parser"), assistant("It is in src/parser.py.")],
        parent=parent,
        parent_tool_use_id="toolu_place_agent",
    )
    return browser_session


def _expand_all_and_scroll(page: Any) -> dict[str, Any]:
    """Expand all, wait for every nested level, scroll so that the subagent link is on
    screen below the top; the place as it then is."""
    page.click("[data-expand-all='#history']")
    wait_for_htmx_idle(page)
    page.wait_for_function(
        "() => document.querySelectorAll('#history .originals-panel:not([hidden])').length >= 2"
    )
    wait_for_htmx_idle(page)
    page.evaluate(
        """() => {
          const link = document.querySelector('#history a.subagent-link');
          const top = link.getBoundingClientRect().top + window.scrollY;
          window.scrollTo(0, Math.max(0, top - 300));
        }"""
    )
    page.wait_for_timeout(400)  # place.js keeps the scroll after 150 ms
    place: dict[str, Any] = page.evaluate(_PLACE)
    return place


def _same_place(page: Any, before: dict[str, Any]) -> None:
    page.wait_for_selector("#history")
    page.wait_for_function(_SETTLED, timeout=20_000)
    wait_for_htmx_idle(page)
    after = page.evaluate(_PLACE)
    assert after["markers"] == before["markers"]
    assert after["open"] == before["open"]
    assert abs(after["y"] - before["y"]) <= 4, (before["y"], after["y"])


@pytest.mark.parametrize("width", [1280, 390])
def test_back_from_a_subagent_keeps_my_place(
    page: Any, live_server: Any, family: Any, watch: Watch, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{family.session.pk}/")
    page.wait_for_selector("#history")
    before = _expand_all_and_scroll(page)
    assert before["markers"] >= 2
    assert before["y"] > 800  # far enough down that losing the place shows

    page.click("#history a.subagent-link")
    page.wait_for_selector("h1:text('Find the parser')")
    page.go_back()
    _same_place(page, before)
    assert_axe_clean(page)
    assert watch.errors == []


def test_the_subagents_parent_link_brings_me_back_to_my_place(
    page: Any, live_server: Any, family: Any, watch: Watch
) -> None:
    """The round trip by links: the subagent's "Subagent of" link opens the parent where
    the reader left it."""
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{family.session.pk}/")
    page.wait_for_selector("#history")
    before = _expand_all_and_scroll(page)

    page.click("#history a.subagent-link")
    page.wait_for_selector("h1:text('Find the parser')")
    page.click("a.parent-link")
    page.wait_for_selector(f"#overview[data-session='{family.session.pk}']")
    _same_place(page, before)
    assert watch.errors == []


def test_reload_keeps_my_place(page: Any, live_server: Any, family: Any, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{family.session.pk}/")
    page.wait_for_selector("#history")
    before = _expand_all_and_scroll(page)

    page.reload()
    _same_place(page, before)
    # "Expand all" is still on: a marker opened now unfolds its content as before.
    assert page.evaluate("document.getElementById('history').hasAttribute('data-expanding-all')")
    assert watch.errors == []


def test_back_from_another_tab_keeps_my_place(
    page: Any, live_server: Any, family: Any, watch: Watch
) -> None:
    """htmx replaces the entry's state when a tab is chosen; Back still finds the place."""
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{family.session.pk}/")
    page.wait_for_selector("#history")
    before = _expand_all_and_scroll(page)

    page.click("#tab-log")
    page.wait_for_selector("#compaction-log")
    wait_for_htmx_idle(page)
    page.go_back()
    _same_place(page, before)
    assert watch.errors == []


def test_a_new_visit_starts_at_the_top(
    page: Any, live_server: Any, family: Any, watch: Watch
) -> None:
    """The place belongs to its history entry: opening the session afresh (a link, not
    Back) shows it as drawn, nothing open."""
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, live_server.url)
    url = f"{live_server.url}/sessions/{family.session.pk}/"
    page.goto(url)
    page.wait_for_selector("#history")
    _expand_all_and_scroll(page)
    page.goto(f"{live_server.url}/")
    page.click(f"a.session-link[href$='{family.session.pk}/']")
    page.wait_for_selector("#history")
    wait_for_htmx_idle(page)
    fresh = page.evaluate(_PLACE)
    assert fresh["open"] == []
    assert watch.errors == []
