"""Deep navigation in a real browser: a summary's Markdown and raw text, what it lost, a
timeline drop that opens the markers down to a nested compaction, the sticky path and the
collapse button."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import F

from sessions_app.models import Compaction, Session

from .conftest import Watch, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

MARKDOWN = (
    "## Where we are\n\n- parser guard in `src/parser.py`\n- tests pass\n\n"
    "```\nmake test\n```\n\n<script>window.__pwned = 1</script> [x](javascript:window.__pwned=2)"
)


def open_session(page: Any, live_server: Any, session: Any, suffix: str = "") -> None:
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.session.pk}/{suffix}")
    page.wait_for_selector("#history")


def test_summary_markdown_and_its_raw_text(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    outer = browser_session.outer
    Compaction.objects.filter(pk=outer.pk).update(summary=MARKDOWN)
    open_session(page, live_server, browser_session)

    page.locator(f"#compaction-{outer.number} > .marker-row button.expander").first.click()
    formatted = page.locator(f"#c{outer.number}-summary-md")
    formatted.locator("h2").wait_for()
    assert formatted.locator("h2").inner_text() == "Where we are"
    assert formatted.locator("li code").first.inner_text() == "src/parser.py"
    assert formatted.locator("pre code").inner_text().strip() == "make test"
    assert formatted.locator("script, a[href^='javascript']").count() == 0
    lost = page.locator(f"[data-lost='{outer.number}']")
    lost.wait_for()
    assert "What was lost" in lost.inner_text()

    toggle = page.locator(f"#c{outer.number}-summary [data-raw-toggle]")
    toggle.click()
    raw = page.locator(f"#c{outer.number}-summary-raw")
    assert raw.is_visible()
    assert not formatted.is_visible()
    assert raw.inner_text().startswith("## Where we are")
    assert toggle.get_attribute("aria-pressed") == "true"
    toggle.click()
    assert formatted.is_visible()
    assert not raw.is_visible()
    assert page.evaluate("window.__pwned") is None
    assert watch.errors == []


#: Whether the element `selector` is what a click at its centre reaches.
_UNCOVERED = """selector => {
  const element = document.querySelector(selector);
  const box = element.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return element === hit || element.contains(hit);
}"""


#: Where the open markers, the line read and the sticky path are (a failure's message).
_GEOMETRY = """([outer, inner, first]) => {
  const rect = e => e ? [Math.round(e.getBoundingClientRect().top),
                         Math.round(e.getBoundingClientRect().bottom)] : null;
  const bar = document.querySelector('#history > .deep-path');
  return {scrollY: window.scrollY, height: document.documentElement.scrollHeight,
    article: rect(document.querySelector(`#c${inner}-originals article[data-seq='${first}']`)),
    inner: rect(document.querySelector(`#c${inner}-originals:not([hidden])`)),
    outer: rect(document.querySelector(`#c${outer}-originals:not([hidden])`)),
    history: rect(document.getElementById('history')),
    bar: bar && [bar.hidden, bar.getAttribute('data-path'), bar.offsetHeight],
    focus: document.activeElement && document.activeElement.id, url: location.href};
}"""


def test_a_timeline_drop_opens_the_markers_down_to_a_nested_compaction(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    outer, inner = browser_session.outer.number, browser_session.inner.number
    open_session(page, live_server, browser_session)
    assert page.locator(f"#compaction-{inner}").count() == 0  # not on the page yet

    page.locator(f"svg.timeline-chart a.drop[href='#compaction-{inner}'] .drop-label").click()

    target = page.locator(f"#c{outer}-originals #compaction-{inner}")
    target.wait_for()
    page.wait_for_function(f"() => document.activeElement.id === 'compaction-{inner}'")
    assert target.is_visible()
    assert page.url.endswith(f"#compaction-{inner}")
    wait_for_htmx_idle(page)
    # The marker gone to stops below the sticky top bar: its buttons can be clicked as they
    # are (they were under the bar, where a click hit the bar).
    originals = f"#c{outer}-originals button[aria-controls='c{inner}-originals']"
    assert page.evaluate(_UNCOVERED, originals) is True

    # Reading inside the nested marker: the sticky path names the markers around it.
    page.locator(originals).click()
    first = browser_session.inner.first_seq
    page.locator(f"#c{inner}-originals article[data-seq='{first}']").scroll_into_view_if_needed()
    page.locator(f"#c{inner}-originals article[data-seq='{first}']").evaluate(
        "node => node.scrollIntoView({block: 'start'})"
    )
    bar = page.locator("#history > .deep-path")
    try:
        page.wait_for_function(
            "() => document.querySelector('#history > .deep-path') !== null &&"
            " !document.querySelector('#history > .deep-path').hidden"
        )
    except Exception as error:  # say what the page looked like, for a failure seen once in CI
        state = page.evaluate(_GEOMETRY, [outer, inner, first])
        raise AssertionError(f"no sticky path after scrolling: {state}") from error
    assert bar.inner_text().split() == [f"#{outer}", "\u203a", f"#{inner}"]
    assert page.evaluate(_UNCOVERED, "#history > .deep-path a") is True  # not under the top bar

    # The collapse button at the bottom of the open marker folds it again.
    page.locator(f"[data-collapse-marker='{inner}']").click()
    assert not page.locator(f"#c{inner}-originals").is_visible()
    assert watch.errors == []


def test_a_link_to_a_nested_compaction_opens_it_on_load(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    outer, inner = browser_session.outer.number, browser_session.inner.number
    open_session(page, live_server, browser_session, f"?tab=history#compaction-{inner}")

    page.locator(f"#c{outer}-originals #compaction-{inner}").wait_for()
    page.wait_for_function(f"() => document.activeElement.id === 'compaction-{inner}'")


def test_a_long_markdown_summary_and_its_losses_fit_a_phone(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    outer = browser_session.outer
    long_line = "x" * 300
    summary = f"{MARKDOWN}\n\n```\n{long_line}\n```\n\n| a | b |\n|---|---|\n| {long_line} | 1 |"
    Compaction.objects.filter(pk=outer.pk).update(summary=summary)
    page.set_viewport_size({"width": 390, "height": 844})
    open_session(page, live_server, browser_session)

    page.locator(f"#compaction-{outer.number} > .marker-row button.expander").first.click()
    lost = page.locator(f"[data-lost='{outer.number}']")
    page.locator(f"#c{outer.number}-lost").scroll_into_view_if_needed()
    lost.wait_for()
    wait_for_htmx_idle(page)

    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


def test_a_marker_just_gone_to_stays_in_view_when_the_history_is_drawn_again(
    page: Any, live_server: Any, browser_session: Any
) -> None:
    """A job's "Compaction #n" link lands as its compaction arrives: the live poll then draws
    the history again, which used to scroll the marker away."""
    outer, inner = browser_session.outer.number, browser_session.inner.number
    page.set_viewport_size({"width": 1000, "height": 500})
    open_session(page, live_server, browser_session)
    page.locator(f"svg.timeline-chart a.drop[href='#compaction-{inner}'] .drop-label").click()
    target = f"#c{outer}-originals #compaction-{inner}"
    page.wait_for_function(f"() => document.activeElement.id === 'compaction-{inner}'")
    wait_for_htmx_idle(page)

    page.evaluate("document.getElementById('history').dataset.drawn = 'before'")
    Session.objects.filter(pk=browser_session.session.pk).update(
        context_revision=F("context_revision") + 1, version=F("version") + 1
    )
    page.wait_for_function("() => document.getElementById('history').dataset.drawn !== 'before'")
    page.locator(target).wait_for()
    wait_for_htmx_idle(page)
    page.wait_for_function(
        "selector => { const box = document.querySelector(selector).getBoundingClientRect();"
        " return box.bottom > 0 && box.top > -2 && box.top < window.innerHeight; }",
        arg=target,
    )
