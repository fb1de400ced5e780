"""Phone and small things (issue 29 item 4) in a real browser: the timeline's text is
readable and its drops are 24x24 px tap targets at 390 px (and at 1280), the page does not
scroll sideways, the compaction log never breaks a number or a time, and drop labels do not
overlap; the preview's steps line ends without a comma."""

from __future__ import annotations

from typing import Any

import pytest

from .axe_check import assert_axe_clean
from .conftest import Watch, login, wait_for_htmx_idle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("browser"),
]

#: The chart's text as drawn: each label's font size in CSS pixels on screen.
_CHART_TEXT = """() => Array.from(document.querySelectorAll('.timeline-chart text')).map(t => ({
  text: t.textContent,
  px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
}))"""

#: Each drop's tap target on screen.
_DROPS = """() => Array.from(document.querySelectorAll('.timeline-chart a.drop')).map(a => {
  const box = a.getBoundingClientRect();
  return {number: a.dataset.drop, width: box.width, height: box.height};
})"""

#: Pairs of drop labels whose boxes on screen intersect.
_LABEL_OVERLAPS = """() => {
  const boxes = Array.from(document.querySelectorAll('.timeline-chart .drop-label'))
    .map(t => [t.textContent, t.getBoundingClientRect()]);
  const overlaps = [];
  boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
    if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) {
      overlaps.push([a, b]);
    }
  }));
  return overlaps;
}"""

#: Texts of `selector` laid out on more than one line (a number or time broken inside).
_BROKEN = """selector => Array.from(document.querySelectorAll(selector)).filter(node => {
  const range = document.createRange();
  range.selectNodeContents(node);
  const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
  return tops.size > 1;
}).map(node => node.textContent)"""

_SIDEWAYS = "() => document.documentElement.scrollWidth - window.innerWidth"


def _open(page: Any, live_server: Any, session: Any, width: int, suffix: str = "") -> None:
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{session.pk}/{suffix}")
    page.wait_for_selector(".timeline-chart")
    wait_for_htmx_idle(page)


@pytest.mark.parametrize("width", [390, 1280])
def test_timeline_is_readable_and_its_drops_are_tap_targets(
    page: Any, live_server: Any, browser_session: Any, watch: Watch, width: int
) -> None:
    _open(page, live_server, browser_session.session, width)
    texts = page.evaluate(_CHART_TEXT)
    assert texts
    small = [t for t in texts if t["px"] < 9.5]
    assert small == [], small
    drops = page.evaluate(_DROPS)
    assert len(drops) >= 2
    tiny = [d for d in drops if d["width"] < 24 or d["height"] < 24]
    assert tiny == [], tiny
    assert page.evaluate(_LABEL_OVERLAPS) == []
    assert page.evaluate(_SIDEWAYS) <= 0
    assert_axe_clean(page)
    # A drop is still reached by a tap: the first goes to its marker.
    first = page.locator(".timeline-chart a.drop").first
    number = first.get_attribute("data-drop")
    box = first.bounding_box()
    page.evaluate("window.scrollTo(0, 0)")
    first.scroll_into_view_if_needed()
    box = first.bounding_box()
    page.mouse.click(box["x"] + 2, box["y"] + box["height"] - 4)
    page.wait_for_function(f"() => location.hash === '#compaction-{number}'")
    assert watch.errors == []


def test_the_log_never_breaks_a_number_or_a_time(
    page: Any, live_server: Any, browser_session: Any, watch: Watch
) -> None:
    _open(page, live_server, browser_session.session, 390, "?tab=log")
    page.wait_for_selector("#compaction-log")
    for selector in (
        "#compaction-log tbody tr[data-compaction-log] > td:first-child",
        "#compaction-log time",
    ):
        assert page.evaluate(_BROKEN, selector) == [], selector
    assert page.evaluate(_SIDEWAYS) <= 0
    assert_axe_clean(page)
    assert watch.errors == []


def test_the_preview_steps_line_ends_without_a_comma(
    page: Any, live_server: Any, browser_session: Any, scripted_summaries: None, watch: Watch
) -> None:
    from sessions_app.models import CompactionProfile

    profile = browser_session.session.profile
    CompactionProfile.objects.filter(pk=profile.pk).update(
        steps=["selective", "summary", "smart_truncate"]
    )
    _open(page, live_server, browser_session.session, 390)
    page.click("#preview-button")
    line = page.locator("[data-preview-steps]")
    line.wait_for()
    text = line.inner_text().strip()
    assert text.startswith("Steps:")
    assert not text.endswith(",")
    assert_axe_clean(page)
    assert watch.errors == []
