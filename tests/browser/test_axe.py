"""Accessibility: axe-core finds no serious or critical issue on any page, at 1280 and 390 px
(issue 29 item 5): the login page, the list (with the upload form open and with search hits),
each session tab (History with markers open and after Expand all, Now vs before, Runtime
context, the log with its details open), an error page and the admin pages a staff user
reaches.

axe-core comes from npm (`make axe-core`, pinned in the Makefile, into .venv/axe-core-<v>)
and is injected by Playwright; the page's CSP forbids injected scripts, so these contexts
bypass it (the pages' own scripts are unchanged).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from .conftest import PASSWORD, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

VENV = Path(__file__).resolve().parents[2] / ".venv"
WIDTHS = (1280, 390)
#: The impacts that fail a page.
BLOCKING = ("serious", "critical")
#: Runs axe on the document; the blocking violations with a few of their nodes.
RUN_AXE = """async (blocking) => {
  const result = await window.axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter((v) => blocking.includes(v.impact))
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      count: v.nodes.length,
      nodes: v.nodes.slice(0, 12).map((n) => {
        const data = (n.any[0] && n.any[0].data) || {};
        const colours = data.fgColor
          ? ` ${data.fgColor} on ${data.bgColor}: ${data.contrastRatio}` : "";
        return n.target.join(" ") + colours;
      }),
    }));
}"""


def axe_script() -> Path:
    """The installed axe.min.js (the newest version in .venv); skipped (failed under CI)
    when none is."""
    found = sorted(VENV.glob("axe-core-*/node_modules/axe-core/axe.min.js"))
    if not found:
        message = "axe-core is not installed (make axe-core installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found[-1]


@pytest.fixture
def tab(browser: Any, request: pytest.FixtureRequest, answering: Any) -> Iterator[Any]:
    """A page at the test's width whose context lets Playwright inject axe-core."""
    width = request.node.callspec.params.get("width", 1280)
    context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.route("**/*", lambda route: route.abort())
    context.close()


class Audit:
    """The blocking findings of every page visited, by page."""

    def __init__(self, page: Any, script: Path) -> None:
        self.page, self.script = page, script
        self.findings: dict[str, list[dict[str, Any]]] = {}

    def check(self, what: str) -> None:
        wait_for_htmx_idle(self.page)
        if not self.page.evaluate("() => Boolean(window.axe)"):
            self.page.add_script_tag(path=str(self.script))
        found = self.page.evaluate(RUN_AXE, list(BLOCKING))
        if found:
            self.findings[what] = found

    def visit(self, url: str, what: str) -> None:
        self.page.goto(url)
        self.check(what)

    def assert_clean(self) -> None:
        lines = [
            f"{what}: {f['impact']} {f['id']} x{f['count']} ({f['help']}) {f['nodes']}"
            for what, found in self.findings.items()
            for f in found
        ]
        assert not lines, "axe-core findings:\n" + "\n".join(lines)


def open_markers(page: Any) -> None:
    """Open every marker's summary and originals, level by level (a nested marker shows
    once its parent's originals are loaded)."""
    closed = page.locator("#history .marker-row button.expander[aria-expanded='false']")
    for _ in range(20):
        if closed.count() == 0:
            return
        closed.first.click()
        wait_for_htmx_idle(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_app_pages_have_no_serious_finding(
    tab: Any, live_server: Any, browser_session: Any, width: int
) -> None:
    audit = Audit(tab, axe_script())
    base = live_server.url
    audit.visit(f"{base}/accounts/login/", "login")
    login(tab, base)
    audit.check("list")
    tab.click("button[aria-controls='upload-panel']")
    audit.check("list, upload form open")
    tab.fill("#history-search input[name=q]", "src/app.py")
    tab.press("#history-search input[name=q]", "Enter")
    tab.wait_for_selector("[data-hit-session]")
    audit.check("list, search hits")
    audit.visit(f"{base}/search/?q=src/app.py", "search page")
    audit.visit(f"{base}/no/such/page/", "404 page")
    # The app's own page, at the device's width (Django's debug page was 980 px wide).
    assert tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    assert tab.locator("[data-status='404']").count() == 1
    session = f"{base}/sessions/{browser_session.session.pk}/"
    audit.visit(f"{session}?tab=history", "history")
    open_markers(tab)
    audit.check("history, markers open")
    tab.click("[data-expand-all='#history']")
    wait_for_htmx_idle(tab)
    tab.wait_for_timeout(300)
    wait_for_htmx_idle(tab)
    audit.check("history, after Expand all")
    tab.click("#preview-button")
    tab.locator("#compact-preview").wait_for()
    wait_for_htmx_idle(tab)
    summary = tab.locator("button[aria-controls='preview-summary']")
    if summary.count():
        summary.click()
    audit.check("actions, preview")
    commit = tab.locator("#commit-button")
    if commit.count():
        commit.click()
        tab.locator(".job").wait_for()
        audit.check("actions, job queued")
    for name in ("compare", "context", "log"):
        audit.visit(f"{session}?tab={name}", name)
    details = tab.locator("button.expander[aria-expanded='false']:visible")
    for _ in range(6):
        if details.count() == 0:
            break
        details.first.click()
        wait_for_htmx_idle(tab)
    audit.check("log, details open")
    audit.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_admin_pages_have_no_serious_finding(
    tab: Any, live_server: Any, browser_session: Any, width: int
) -> None:
    get_user_model().objects.create_superuser("root", "root@example.test", PASSWORD)
    audit = Audit(tab, axe_script())
    base = live_server.url
    audit.visit(f"{base}/admin/login/", "admin login")
    login(tab, base, username="root")
    for path in (
        "/admin/",
        "/admin/sessions_app/compactionprofile/",
        "/admin/sessions_app/compactionprofile/add/",
        "/admin/sessions_app/summarizerconfig/add/",
        "/admin/sessions_app/session/",
        f"/admin/sessions_app/session/{browser_session.session.pk}/change/",
        "/admin/sessions_app/compaction/",
        f"/admin/sessions_app/compaction/{browser_session.outer.pk}/change/",
        "/admin/sessions_app/compactionjob/",
        "/admin/sessions_app/summarizerconfig/",
        "/admin/sessions_app/apikey/",
        "/admin/sessions_app/apikey/add/",
        "/admin/auth/user/",
    ):
        audit.visit(f"{base}{path}", path)
    audit.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_skip_link_comes_first_and_the_history_has_a_heading(
    tab: Any, live_server: Any, browser_session: Any, width: int
) -> None:
    login(tab, live_server.url)
    tab.goto(f"{live_server.url}/sessions/{browser_session.session.pk}/?tab=history")
    tab.keyboard.press("Tab")
    focused = tab.evaluate("() => [document.activeElement.className, document.activeElement.hash]")
    assert focused == ["skip-link", "#main"]
    assert tab.locator(".skip-link").is_visible()  # shown once focused
    tab.keyboard.press("Enter")
    assert tab.evaluate("() => document.activeElement.id") == "main"
    heading = tab.locator("#history h2")
    assert heading.text_content() == "History"
    assert tab.get_attribute("#history", "aria-labelledby") == heading.get_attribute("id")
