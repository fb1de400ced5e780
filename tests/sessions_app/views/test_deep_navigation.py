"""Deep navigation in the history: rendered summaries with their raw text, what a summary
lost, and the path of markers down to a nested compaction."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from compaction import expand_path_groups, extract_identifiers, state_recall
from compaction.carried_state import STATE_OPEN
from sessions_app.models import Compaction
from sessions_app.services.compacting.archives import read_archive

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
    inner = ui_session.inner
    pk, n = ui_session.session.pk, inner.number
    url = reverse("ui:compaction_lost", args=[pk, n])
    originals = [dict(entry.message) for entry in read_archive(inner).entries]
    identifiers = extract_identifiers(originals)
    files = state_recall(originals, []).files
    assert "src/app/models.py" in identifiers  # named by a request of the originals
    assert files

    html = logged_in.get(url).content.decode()

    # The engine's summary ends with the session state (docs/behaviour.md#what-a-summary-
    # always-keeps): its block lists every touched file and quotes the latest request, which
    # names src/app/models.py. What the scripted text and the block omit is listed, and only
    # that.
    summary = expand_path_groups(inner.summary)
    missing = [identifier for identifier in identifiers if identifier not in summary]
    assert missing
    assert "src/app/models.py" not in missing
    assert f'data-lost="{n}"' in html
    assert f"does not mention {len(missing)} of the {len(identifiers)} identifiers" in html
    assert re.findall(r"<li><code>(.*?)</code></li>", html) == [escape(i) for i in missing]
    assert "(recall " in html
    assert "Session state lost" not in html

    # A summary without the block (written before the state was carried) loses the path
    # and the touched files: both are listed.
    narrative = inner.summary.split(f"\n\n{STATE_OPEN}")[0]
    Compaction.objects.filter(pk=inner.pk).update(summary=narrative)

    html = logged_in.get(url).content.decode()

    assert "What was lost:" in html
    assert "<li><code>src/app/models.py</code></li>" in html
    assert 'data-lost-state="touched files"' in html
    assert f"<strong>Session state lost:</strong> {len(files)} touched files." in html
    for path in files:
        assert f"<li><code>{escape(path)}</code></li>" in html


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
