"""Deep navigation in the history: rendered summaries with their raw text, what a summary
lost, and the path of markers down to a nested compaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

MARKDOWN = (
    "## Done\n\n- guard in `src/parser.py`\n- tests\n\n```\nmake test\n```\n<script>x()</script>"
)


def test_summary_renders_markdown_beside_its_raw_text(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    inner = ui_session.inner
    Compaction.objects.filter(pk=inner.pk).update(summary=MARKDOWN)
    url = reverse("ui:compaction_summary", args=[ui_session.session.pk, inner.number])

    html = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()

    formatted = html.split('class="summary-text summary-md"', 1)[1].split("</div>", 1)[0]
    assert "<h2>Done</h2>" in formatted
    assert "<li>guard in <code>src/parser.py</code></li>" in formatted
    assert "<pre><code>make test\n</code></pre>" in formatted
    raw = html.split('class="text summary-raw"', 1)[1].split("</pre>", 1)[0]
    assert "hidden" in raw.split(">", 1)[0]
    assert "## Done\n\n- guard in `src/parser.py`" in raw
    assert "&lt;script&gt;x()&lt;/script&gt;" in raw
    toggle = [a for tag, a in ui.elements(html) if tag == "button" and "data-raw-toggle" in a]
    assert toggle[0]["aria-controls"] == f"c{inner.number}-summary-md c{inner.number}-summary-raw"
    assert not any(tag == "script" for tag, _ in ui.elements(html))


def test_summary_loads_what_was_lost_when_shown(ui_session: UiSession, logged_in: Client) -> None:
    pk, n = ui_session.session.pk, ui_session.inner.number
    url = reverse("ui:compaction_summary", args=[pk, n])

    html = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert f'hx-get="{reverse("ui:compaction_lost", args=[pk, n])}"' in html
    assert 'hx-trigger="intersect once"' in html


def test_what_was_lost_lists_the_missing_identifiers(
    ui_session: UiSession, logged_in: Client
) -> None:
    pk, n = ui_session.session.pk, ui_session.inner.number

    html = logged_in.get(reverse("ui:compaction_lost", args=[pk, n])).content.decode()

    assert f'data-lost="{n}"' in html
    assert "What was lost:" in html
    assert "<li><code>src/app/models.py</code></li>" in html
    assert "(recall " in html


def test_what_was_lost_says_so_when_nothing_is_missing(
    ui_session: UiSession, logged_in: Client
) -> None:
    inner = ui_session.inner
    Compaction.objects.filter(pk=inner.pk).update(archive="", first_seq=None, last_seq=None)

    html = logged_in.get(reverse("ui:compaction_lost", args=[inner.session_id, inner.number]))

    assert b"not available to compare with" in html.content


def test_path_leads_through_the_enclosing_markers(ui_session: UiSession, logged_in: Client) -> None:
    pk = ui_session.session.pk
    inner, outer = ui_session.inner, ui_session.outer

    nested = logged_in.get(reverse("ui:compaction_path", args=[pk, inner.number])).json()
    top = logged_in.get(reverse("ui:compaction_path", args=[pk, outer.number])).json()

    assert nested == {"path": [outer.number, inner.number]}
    assert top == {"path": [outer.number]}
    assert logged_in.get(reverse("ui:compaction_path", args=[pk, 99])).status_code == 404


def test_an_open_marker_has_a_collapse_button(ui_session: UiSession, logged_in: Client) -> None:
    pk = ui_session.session.pk
    html = logged_in.get(reverse("ui:tab", args=[pk, "history"]), HTTP_HX_REQUEST="true")

    assert f'data-collapse-marker="{ui_session.outer.number}"'.encode() in html.content
