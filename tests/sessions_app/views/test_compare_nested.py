"""Before / after of a compaction whose input held an earlier, long summary (nested compactions).

The earlier summary has no history seq, so the page cannot link a "show all" to a stored
message: it shows that summary whole, from both places that open the view (the log tab and
the history's marker).
"""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from compaction import ScriptedSummarizer
from sessions_app.models import Compaction, Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import append_messages, create_session
from sessions_app.viewmodels.blocks import TEXT_PREVIEW_CHARS
from tests.support.histories import synthetic_history

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

#: Longer than the preview cut, so the page would offer "show all" for it.
LONG_SUMMARY = "Inner summary: the parser now guards empty input. " * 60
assert len(LONG_SUMMARY) > TEXT_PREVIEW_CHARS


@pytest.fixture
def nested(user: Any, ui: Any) -> tuple[Session, Compaction]:
    """A session compacted twice; the second compaction re-summarized the first's summary."""
    profile = ui.ui_profile()
    session = create_session(
        user, messages=synthetic_history(40, words_per_message=120), profile=profile
    )
    inner = compact_session(session, summarizer=ScriptedSummarizer(default=LONG_SUMMARY))
    assert inner.compaction is not None, inner.reason
    append_messages(session, synthetic_history(40, words_per_message=120)[1:])
    outer = compact_session(session, summarizer=ScriptedSummarizer(default="Outer summary."))
    assert outer.compaction is not None, outer.reason
    stored = Compaction.objects.get(pk=outer.compaction.pk)
    assert Compaction.objects.get(pk=inner.compaction.pk).parent_id == stored.pk
    return session, stored


def _compare_links(html: str) -> list[str]:
    return [unescape(url) for url in re.findall(r'hx-get="([^"]*/compare/)"', html)]


@pytest.mark.parametrize("opener", ["log tab", "history marker"])
def test_before_after_of_a_nested_compaction_shows_the_earlier_summary_whole(
    nested: tuple[Session, Compaction], logged_in: Client, opener: str
) -> None:
    session, outer = nested
    if opener == "log tab":
        url = reverse("ui:tab", args=[session.pk, "log"])
    else:  # the marker's summary panel holds the button
        url = reverse("ui:compaction_summary", args=[session.pk, outer.number])
    page = logged_in.get(url, HTTP_HX_REQUEST="true")
    assert page.status_code == 200
    link = reverse("ui:compaction_compare", args=[session.pk, outer.number])
    assert link in _compare_links(page.content.decode())
    response = logged_in.get(link, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert unescape(LONG_SUMMARY.strip()) in unescape(html), "the earlier summary, whole"
    assert 'class="badge summary"' in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "element ids stay unique"
