"""Messages of the full history: one, a range, an API page, a level of the tree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from sessions_app.selectors.cursors import InvalidCursor, encode_cursor
from sessions_app.selectors.history import (
    HistoryLevel,
    first_seq_after,
    history_page,
    message_at,
    message_range,
    message_tokens,
)
from sessions_app.services.errors import NotFound

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def test_one_message_and_a_range(make_session: Any, conversation: Any) -> None:
    session = make_session(messages=conversation(3))
    assert message_at(session, 0).seq == 0
    with pytest.raises(NotFound):
        message_at(session, 999)
    rows, more = message_range(session, 1, 4, limit=2)
    assert [r.seq for r in rows] == [1, 2]
    assert more
    rows, more = message_range(session, 1, 2, limit=5)
    assert ([r.seq for r in rows], more) == ([1, 2], False)
    assert [seq for seq, _ in message_tokens(session)] == list(range(session.message_count))


def test_history_pages_follow_their_cursor(ui_session: UiSession) -> None:
    session = ui_session.session
    seqs: list[int] = []
    cursor = None
    while True:
        page = history_page(session, cursor=cursor, limit=7)
        seqs += [m.seq for m in page.messages]
        assert page.in_context <= {m.pk for m in page.messages}
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seqs == list(range(session.message_count))
    with pytest.raises(InvalidCursor):
        history_page(session, cursor=encode_cursor({"n": 1}), limit=7)


def test_a_level_excludes_its_childrens_ranges(ui_session: UiSession) -> None:
    inner, outer = ui_session.inner, ui_session.outer
    assert inner.first_seq is not None
    assert inner.last_seq is not None
    assert outer.last_seq is not None
    level = HistoryLevel(ui_session.session, outer, [inner])
    shown = [m.seq for m in level.messages(None, None)]
    assert shown
    assert all(inner.last_seq < s <= outer.last_seq for s in shown)
    run = level.run(None, None)
    assert run is not None
    assert (run.count, run.first_seq, run.last_seq) == (len(shown), shown[0], shown[-1])
    newest = level.edge(None, None, newest=True, count=2)
    assert [m.seq for m in newest] == shown[::-1][:2]
    assert level.run(float(outer.last_seq), None) is None


def test_first_message_after_a_time(ui_session: UiSession) -> None:
    session = ui_session.session
    last = session.messages.order_by("-seq").first()
    assert last is not None
    assert first_seq_after(session, last.created_at) is None
