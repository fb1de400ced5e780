"""Failed compaction attempts: red markers in the history, placed by time, with their error."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction, Message
from sessions_app.viewmodels.history import FailedMarkerView, MarkerTree, history_window

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

ERROR = {
    "type": "SummaryError",
    "message": "rate limited <b>slow down</b>",
    "status": 429,
    "reason": "summarizer_error",
    "attempts": 3,
}


def failed_after(
    ui_session: UiSession, seq: int, *, error: dict[str, Any] | None = None
) -> Compaction:
    """A failed attempt recorded just after message `seq` was written."""
    session = ui_session.session
    when = Message.objects.get(session=session, seq=seq).created_at + timedelta(microseconds=1)
    return Compaction.objects.create(
        session=session,
        number=3,
        created_at=when,
        trigger=Compaction.Trigger.MANUAL,
        status=Compaction.Status.FAILED,
        failure_reason="summarizer_error",
        first_seq=1,
        last_seq=seq,
        details={"error": error} if error is not None else {},
    )


def test_history_shows_a_failed_attempt_with_its_error(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    last = Message.objects.filter(session=ui_session.session).order_by("-seq").first()
    assert last is not None
    # The last message came a second later (messages appended together share their time).
    Message.objects.filter(pk=last.pk).update(created_at=last.created_at + timedelta(seconds=1))
    failed_after(ui_session, last.seq - 1, error=ERROR)
    html = logged_in.get(reverse("ui:session", args=[ui_session.session.pk])).content.decode()
    start = html.index('id="compaction-3"')
    row = html[html.rindex("<div", 0, start) : html.index("</div>\n</div>", start)]
    assert "marker-failed" in row
    assert "Compaction #3 failed" in row
    assert "summarizer_error" in row
    assert "HTTP 429" in row
    assert "rate limited &lt;b&gt;slow down&lt;/b&gt;" in row  # the message stays text
    assert "after 3 attempts" in row
    assert "<button" not in row  # no Summary or Originals: it folds nothing
    # It is not a marker of the tree: the API's tree and the page's markers are unchanged.
    assert ui.compaction_numbers(html) == [ui_session.outer.number]
    # Placed by time: after the second-to-last message, before the last one.
    assert html.index(f'data-seq="{last.seq - 1}"') < start < html.index(f'data-seq="{last.seq}"')


def test_failed_marker_without_error_details_shows_the_reason(
    ui_session: UiSession, logged_in: Client
) -> None:
    last = Message.objects.filter(session=ui_session.session).order_by("-seq").first()
    assert last is not None
    failed_after(ui_session, last.seq)
    html = logged_in.get(reverse("ui:session", args=[ui_session.session.pk])).content.decode()
    start = html.index('id="compaction-3"')
    assert "summarizer_error" in html[start : start + 2000]
    assert "marker-error" not in html[start : html.index("</div>\n</div>", start)]


def test_failed_attempts_are_top_level_rows_only(ui_session: UiSession) -> None:
    failed_after(ui_session, 2, error=ERROR)
    tree = MarkerTree.for_session(ui_session.session)
    assert [c.number for c in tree.failed] == [3]
    top = history_window(ui_session.session, tree=tree)
    assert [i.number for i in top.items if isinstance(i, FailedMarkerView)] == [3]
    assert [m.number for m in top.markers] == [ui_session.outer.number]
    inside = history_window(ui_session.session, tree=tree, parent=ui_session.outer)
    assert not [i for i in inside.items if isinstance(i, FailedMarkerView)]
    assert tree.path_to(tree.by_number[3]) == [3]


def test_api_history_leaves_failed_attempts_out(ui_session: UiSession, logged_in: Client) -> None:
    failed_after(ui_session, 2, error=ERROR)
    body = logged_in.get(f"/api/sessions/{ui_session.session.pk}/history?limit=1000").json()
    assert [m["number"] for m in body["compactions"]] == [ui_session.outer.number]
