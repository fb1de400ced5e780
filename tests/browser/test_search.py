"""Search everything (issue 29 item 6), in the browser at 1280 and 390 px: the list page's
box finds messages of every session, archived originals included, grouped by session; a hit
opens the session at its message with the markers above it open; `?at=` works on its own,
through nested markers and folded gaps; axe-core finds nothing serious on the way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sessions_app.models import Message
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import synthetic_history

from .conftest import login, wait_for_htmx_idle
from .test_axe import Audit, axe_script

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

WIDTHS = (1280, 390)
#: True once at.js has arrived at the message (its data-seq).
ARRIVED = "() => document.documentElement.getAttribute('data-at-arrived')"
#: The message's box lies inside the window.
IN_VIEW = """(seq) => {
  const box = document.querySelector(`#history .msg[data-seq='${seq}']`).getBoundingClientRect();
  return box.bottom > 0 && box.top < window.innerHeight;
}"""


@pytest.fixture
def tab(browser: Any, request: pytest.FixtureRequest, answering: Any) -> Iterator[Any]:
    """A page at the test's width (axe-core may be injected: the CSP is bypassed)."""
    width = request.node.callspec.params.get("width", 1280)
    context = browser.new_context(viewport={"width": width, "height": 800}, bypass_csp=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.route("**/*", lambda route: route.abort())
    context.close()


def seq_holding(session: Any, text: str) -> int:
    for message in Message.objects.filter(session=session).order_by("seq"):
        if text in str(message.content):
            return int(message.seq)
    raise AssertionError(f"no message holds {text!r}")


def arrived_at(page: Any, seq: int) -> None:
    """at.js went to message `seq`: drawn, in view, focused."""
    page.wait_for_function(ARRIVED, timeout=20_000)
    assert page.evaluate(ARRIVED) == str(seq)
    assert page.evaluate(IN_VIEW, seq)
    assert page.evaluate("() => document.activeElement.getAttribute('data-seq')") == str(seq)


def expanded(page: Any, number: int) -> str | None:
    value: str | None = page.get_attribute(
        f"button[aria-controls='c{number}-originals']", "aria-expanded"
    )
    return value


@pytest.mark.parametrize("width", WIDTHS)
def test_a_hit_opens_its_session_at_the_message(
    tab: Any, live_server: Any, browser_session: Any, browser_user: Any, width: int
) -> None:
    create_session(
        browser_user,
        title="Second project",
        messages=[*synthetic_history(3), {"role": "user", "content": "Edit src/app.py again"}],
    )
    session = browser_session.session
    archived = seq_holding(session, "cat src/app.py")  # in #2's archived originals
    audit = Audit(tab, axe_script())
    login(tab, live_server.url)
    tab.fill("#history-search input[name=q]", "src/app.py")
    tab.press("#history-search input[name=q]", "Enter")
    tab.wait_for_selector("[data-hit-session]")
    wait_for_htmx_idle(tab)
    groups = tab.locator("[data-hit-session]")
    assert groups.count() == 2
    assert tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    audit.check("search hits")
    hit = tab.locator(f"[data-hit-session='{session.pk}'] [data-hit-message='{archived}'] a")
    hit.click()
    arrived_at(tab, archived)
    assert expanded(tab, browser_session.outer.number) == "true"
    audit.check("history at a hit")
    audit.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_at_opens_nested_markers_and_gaps(
    tab: Any, live_server: Any, browser_session: Any, browser_user: Any, width: int
) -> None:
    session = browser_session.session
    nested = seq_holding(session, "Please handle task 1")  # in #1, inside #2
    login(tab, live_server.url)
    tab.goto(f"{live_server.url}/sessions/{session.pk}/?tab=history&at={nested}")
    arrived_at(tab, nested)
    assert expanded(tab, browser_session.outer.number) == "true"
    assert expanded(tab, browser_session.inner.number) == "true"
    inside = tab.locator(f"#c{browser_session.inner.number}-originals .msg[data-seq='{nested}']")
    assert inside.count() == 1
    long = create_session(browser_user, title="Long", messages=synthetic_history(130))
    tab.goto(f"{live_server.url}/sessions/{long.pk}/?tab=history&at=2")
    arrived_at(tab, 2)  # folded in a gap of the newest-first window: opened until drawn
