"""The session page and the list follow a growing session without a reload: new messages
appear at the end of the history, open markers stay open, the scroll position stays."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.services.sessions.lifecycle import append_messages
from tests.support.histories import assistant, exchange, user

from .conftest import Watch, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

#: The page polls every 3 s; a new row must show within two polls and some slack.
LIVE_TIMEOUT_MS = 9_000


def test_a_new_message_appears_without_a_reload(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    session = browser_session.session
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#history")
    outer = browser_session.outer.number
    button = page.locator(f"#compaction-{outer} > .marker-row button.expander[data-originals]")
    button.click()
    page.locator(f"#c{outer}-originals article").first.wait_for()
    wait_for_htmx_idle(page)
    page.evaluate("window.__sameDocument = true; window.scrollTo(0, 200)")
    scrolled = page.evaluate("window.scrollY")
    count_before = page.locator("#history-items > article.msg").count()
    messages_before = session.message_count

    append_messages(session, [user("Live from the watcher?"), assistant("Live answer arrived.")])

    row = page.locator("#history-items > article.msg", has_text="Live answer arrived.")
    row.wait_for(timeout=LIVE_TIMEOUT_MS)
    wait_for_htmx_idle(page)
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    assert page.locator("#history-items > article.msg").count() == count_before + 2
    newest = page.locator("#history-items > article.msg").last
    assert newest.get_attribute("data-seq") == str(messages_before + 1)
    assert button.get_attribute("aria-expanded") == "true"  # the open marker stays open
    assert page.locator(f"#c{outer}-originals").is_visible()
    assert page.evaluate("window.scrollY") == scrolled
    stats = page.locator("#overview .stats")
    assert f"{messages_before + 2} messages" in stats.inner_text()
    # Nothing more arrives: the next polls answer 204 and the page stays as it is.
    page.wait_for_timeout(3500)
    assert page.locator("#history-items > article.msg").count() == count_before + 2
    assert watch.errors == []


def test_the_list_shows_a_session_growing(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    session = browser_session.session
    login(page, live_server.url)
    row = page.locator(f'tr[data-session="{session.pk}"]')
    messages = row.locator("td.num").first
    before = int(messages.inner_text())
    page.evaluate("window.__sameDocument = true")
    append_messages(session, [user("One more for the list.")])
    page.wait_for_function(
        f"() => document.querySelector('tr[data-session=\"{session.pk}\"] td.num')"
        f".textContent.trim() === '{before + 1}'",
        timeout=LIVE_TIMEOUT_MS + 3000,
    )
    assert page.evaluate("window.__sameDocument") is True
    assert watch.errors == []


def test_a_compaction_redraws_the_history_and_open_rows_stay_open(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    from compaction import ScriptedSummarizer
    from sessions_app.services.compacting.session_compaction import compact_session
    from tests.sessions_app.conftest_ui import ui_profile

    session = browser_session.session
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#history")
    page.evaluate("window.__sameDocument = true")
    more: list[dict[str, Any]] = []
    for index in range(4):
        more += [user(f"Extra task {index}: " + "word " * 60), assistant(f"Extra {index} done.")]
    more += [*exchange("toolu_live_1", "Read", {"file_path": "src/live.py"}, "live = True")]
    more.append(assistant("Read it."))
    append_messages(session, more)
    # The new rows arrive by the poll; open the new tool row.
    tool = page.locator("#history-items > article.msg button.tool-line", has_text="src/live.py")
    tool.wait_for(timeout=LIVE_TIMEOUT_MS)
    wait_for_htmx_idle(page)
    tool_id = tool.get_attribute("aria-controls")
    tool.click()
    assert tool.get_attribute("aria-expanded") == "true"
    outcome = compact_session(
        session,
        profile=ui_profile(),
        summarizer=ScriptedSummarizer(default="Third summary."),
        force=True,
    )
    assert outcome.compaction is not None, outcome.reason
    number = outcome.compaction.number
    page.locator(f"#history-items > #compaction-{number}").wait_for(timeout=LIVE_TIMEOUT_MS)
    wait_for_htmx_idle(page)
    assert page.evaluate("window.__sameDocument") is True
    # The redrawn history opens again what was open (the tool row is kept, not folded).
    reopened = page.locator(f"#history-items button.expander[aria-controls='{tool_id}']")
    assert reopened.get_attribute("aria-expanded") == "true"
    assert page.locator(f"#{tool_id}").is_visible()
    assert watch.errors == []


def test_no_polling_while_the_tab_is_hidden(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    session = browser_session.session
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#history")
    page.evaluate(
        "Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true})"
    )
    asked = len([url for url in watch.requests if "/changes/" in url])
    page.wait_for_timeout(4000)  # more than one polling period
    assert len([url for url in watch.requests if "/changes/" in url]) == asked
    # Shown again: one poll at once, without waiting for the next period.
    page.evaluate(
        "Object.defineProperty(document, 'visibilityState', "
        "{value: 'visible', configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    page.wait_for_timeout(500)
    assert len([url for url in watch.requests if "/changes/" in url]) == asked + 1
    assert watch.errors == []


#: Records, from now on, every moment the summary region `id` is not showing a summary:
#: folded, or back on "Loading summary…" (each DOM change is checked once it is done).
_WATCH_SUMMARY = """id => {
  window.__summaryGone = [];
  const check = () => {
    const region = document.getElementById(id);
    if (!region || region.hidden || !region.querySelector('.summary-text')) {
      const state = region && region.hidden ? 'folded' : region && region.textContent.trim();
      window.__summaryGone.push(state || 'missing');
    }
  };
  new MutationObserver(check).observe(
    document.body, {subtree: true, childList: true, attributes: true});
}"""
#: Marks the history on the page, so that a test can wait for it to be drawn again.
_MARK_HISTORY = "() => { document.getElementById('history').dataset.drawnBefore = '1'; }"
_HISTORY_REDRAWN = (
    "() => { const h = document.getElementById('history'); return h && !h.dataset.drawnBefore; }"
)


_VISIBILITY = (
    "state => Object.defineProperty(document, 'visibilityState', "
    "{value: state, configurable: true})"
)
_VISIBILITY_SHOWN = (
    "() => { Object.defineProperty(document, 'visibilityState', "
    "{value: 'visible', configurable: true}); "
    "document.dispatchEvent(new Event('visibilitychange')); }"
)


def _redrawn(page: Any, redraw: str) -> None:
    """Run `redraw` in the page and wait until the history is drawn again and settled."""
    page.evaluate(_MARK_HISTORY)
    page.evaluate(redraw)
    page.wait_for_function(_HISTORY_REDRAWN)
    wait_for_htmx_idle(page)


def test_an_open_summary_stays_shown_while_the_history_is_drawn_again(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    """Both ways the history is drawn again (the open tab reloaded after an action, the live
    poll after a compaction) keep an open summary on screen: it neither folds nor goes back
    to "Loading summary…" until its fresh copy arrives."""
    from django.db.models import F

    from sessions_app.models import Session

    session = browser_session.session
    outer = browser_session.outer.number
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#history")
    page.locator(f"#compaction-{outer} > .marker-row button.expander:not([data-originals])").click()
    page.locator(f"#c{outer}-summary .summary-text").wait_for()
    wait_for_htmx_idle(page)
    page.evaluate(_WATCH_SUMMARY, f"c{outer}-summary")

    _redrawn(page, "() => htmx.trigger(document.body, 'session-changed')")
    # Existing entries changed (as after a compaction): the live poll draws the history anew.
    # The page is hidden meanwhile, so that no poll reads while the test writes (SQLite).
    page.evaluate(_VISIBILITY, "hidden")
    wait_for_htmx_idle(page)
    Session.objects.filter(pk=session.pk).update(
        version=F("version") + 1, context_revision=F("context_revision") + 1
    )
    _redrawn(page, _VISIBILITY_SHOWN)  # shown again: live.js polls at once

    assert page.evaluate("window.__summaryGone") == []
    assert page.locator(f"#c{outer}-summary .summary-text").is_visible()
    assert watch.errors == []


def test_a_marker_opened_before_htmx_processed_it_loads(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    """A Summary clicked while the redrawn history is still settling (htmx binds the new
    buttons' requests only then) loads all the same."""
    session = browser_session.session
    outer = browser_session.outer.number
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#history")
    page.evaluate("() => { htmx.config.defaultSettleDelay = 5000; }")
    page.evaluate(_MARK_HISTORY)
    page.evaluate("() => htmx.trigger(document.body, 'session-changed')")
    page.wait_for_function(_HISTORY_REDRAWN)
    assert page.locator("#history.htmx-added, #history .htmx-added").count() > 0  # unsettled

    page.locator(f"#compaction-{outer} > .marker-row button.expander:not([data-originals])").click()

    page.locator(f"#c{outer}-summary .summary-text").wait_for(timeout=3000)
    # Swaps from here on (a live poll's) settle at once; those begun settle their 5 s out.
    page.evaluate("() => { htmx.config.defaultSettleDelay = 20; }")
    wait_for_htmx_idle(page, timeout=20_000)
    assert watch.errors == []
