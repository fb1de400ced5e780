"""The caller's sessions: lookup, the one search rule, sorted keyset pages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sessions_app.models import Session
from sessions_app.selectors.cursors import InvalidCursor
from sessions_app.selectors.sessions import (
    SORTS,
    owned_session,
    owned_sessions,
    search_sessions,
    session_slice,
)
from sessions_app.services.errors import NotFound
from sessions_app.services.sessions.lifecycle import create_session

pytestmark = pytest.mark.django_db


def test_owned_session_is_not_found_for_others_and_bad_ids(user: Any, other_user: Any) -> None:
    mine = create_session(user, title="mine")
    assert owned_session(user, str(mine.pk)) == mine
    assert owned_session(user, mine.pk) == mine
    for owner, key in ((other_user, str(mine.pk)), (user, "not-a-uuid"), (user, uuid.uuid4())):
        with pytest.raises(NotFound):
            owned_session(owner, key)
    assert list(owned_sessions(None)) == []


def test_search_needs_every_word_in_some_field(user: Any) -> None:
    create_session(user, title="parser bug", model="claude-x")
    create_session(user, title="deploy", metadata={}, model="gpt-y")
    found = search_sessions(owned_sessions(user), "PARSER claude")
    assert [s.title for s in found] == ["parser bug"]
    assert search_sessions(owned_sessions(user), "parser gpt").count() == 0
    assert search_sessions(owned_sessions(user), "  ").count() == 2


@pytest.mark.parametrize("sort", sorted(SORTS))
def test_slices_visit_every_session_once_in_every_sort(user: Any, sort: str) -> None:
    created = [create_session(user, title=f"s{i % 3}") for i in range(7)]
    seen: list[Session] = []
    cursor = None
    while True:
        page = session_slice(owned_sessions(user), sort=sort, cursor=cursor, limit=3)
        assert page.is_first == (cursor is None)
        seen += page.sessions
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(s.pk for s in seen) == sorted(s.pk for s in created)
    assert len(seen) == len(created)


def test_a_cursor_of_another_sort_is_invalid(user: Any) -> None:
    for index in range(3):
        create_session(user, title=f"s{index}")
    page = session_slice(owned_sessions(user), sort="title", limit=1)
    assert page.next_cursor
    with pytest.raises(InvalidCursor):
        session_slice(owned_sessions(user), sort="recent", cursor=page.next_cursor)


def test_an_unknown_sort_is_the_default(user: Any) -> None:
    create_session(user, title="a")
    assert session_slice(owned_sessions(user), sort="nope").sort == "recent"
