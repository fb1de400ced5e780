"""A session's compactions: one by number, pages, the timeline's and the log's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessions_app.models import Compaction
from sessions_app.selectors.compactions import (
    compaction_links,
    compaction_log,
    compaction_page,
    drawn_compactions,
    session_compaction,
    session_compactions,
)
from sessions_app.selectors.cursors import InvalidCursor, encode_cursor
from sessions_app.services.errors import NotFound

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def test_one_compaction_by_number(ui_session: UiSession) -> None:
    session = ui_session.session
    assert session_compaction(session, 1) == ui_session.inner
    with pytest.raises(NotFound):
        session_compaction(session, 99)


def test_lists_in_their_orders(ui_session: UiSession) -> None:
    session = ui_session.session
    Compaction.objects.filter(pk=ui_session.inner.pk).update(status=Compaction.Status.FAILED)
    assert [c.number for c in session_compactions(session)] == [1, 2]
    assert [c.number for c in compaction_log(session)] == [2, 1]
    assert [c.number for c in drawn_compactions(session)] == [2]
    links = {c.number: c.parent_id for c in compaction_links(session.pk)}
    assert links == {1: ui_session.outer.pk, 2: None}


def test_pages_by_status_and_cursor(ui_session: UiSession) -> None:
    session = ui_session.session
    first = compaction_page(session, limit=1)
    assert [c.number for c in first.items] == [1]
    assert first.next_cursor
    rest = compaction_page(session, cursor=first.next_cursor, limit=1)
    assert [c.number for c in rest.items] == [2]
    assert rest.next_cursor is None
    assert compaction_page(session, status="reverted").items == []
    with pytest.raises(InvalidCursor):
        compaction_page(session, cursor=encode_cursor({"n": "1"}))
