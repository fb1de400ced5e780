"""Search everything from the list page (issue 29 item 6): full histories of all the user's
sessions, archived originals included, hits grouped by session, each opening the History tab
at its message; `messages/<n>/path/` names the markers to open to reach it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Message
from sessions_app.services.sessions.lifecycle import create_session
from tests.sessions_app.conftest_ui import build_ui_session
from tests.support.histories import assistant
from tests.support.histories import user as user_message

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def hits_of(client: Client, query: str, *, htmx: bool = True) -> str:
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.get(reverse("ui:search"), {"q": query}, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def seq_holding(session: Any, text: str) -> int:
    for message in Message.objects.filter(session=session).order_by("seq"):
        if text in str(message.content):
            return int(message.seq)
    raise AssertionError(f"no message holds {text!r}")


def test_the_list_page_has_the_search_box(logged_in: Client) -> None:
    page = logged_in.get(reverse("ui:session_list")).content.decode()
    assert 'id="history-search"' in page
    assert f'hx-get="{reverse("ui:search")}"' in page
    assert 'id="history-hits"' in page


def test_hits_are_grouped_by_session_with_archived_originals(
    logged_in: Client, user: Any, other_user: Any
) -> None:
    nested = build_ui_session(user)
    create_session(
        user,
        title="Second project",
        messages=[user_message("Please edit src/app.py again"), assistant("Edited src/app.py.")],
    )
    build_ui_session(other_user, title="Not yours")
    html = hits_of(logged_in, "src/app.py")
    groups = re.findall(r'data-hit-session="([0-9a-f-]+)"', html)
    assert len(groups) == 2  # alice's two sessions, never bob's
    assert "Not yours" not in html
    assert str(nested.session.pk) in groups
    archived = seq_holding(nested.session, "cat src/app.py")
    url = f"/sessions/{nested.session.pk}/?tab=history&amp;at={archived}"
    assert url in html
    assert f"in compaction #{nested.outer.number}" in html
    assert "<mark>src</mark>/<mark>app</mark>.<mark>py</mark>" in html


def test_the_search_page_works_without_htmx(logged_in: Client, user: Any) -> None:
    build_ui_session(user)
    page = hits_of(logged_in, "src/app.py", htmx=False)
    assert "<html" in page
    assert 'id="history-search"' in page
    assert "data-hit-session" in page


def test_a_query_without_words_is_no_search(logged_in: Client, user: Any) -> None:
    build_ui_session(user)
    html = hits_of(logged_in, " ./ ")
    assert "data-hit-session" not in html
    assert "No message matches" not in html
    assert "No message matches" in hits_of(logged_in, "zebraquokka")


def test_the_path_to_an_archived_message_names_its_markers(
    logged_in: Client, user: Any, other_user: Any
) -> None:
    nested = build_ui_session(user)
    session = nested.session
    first = seq_holding(session, "Please handle task 1")  # in #1, which #2 re-summarized
    archived = seq_holding(session, "cat src/app.py")  # in #2 only
    live = seq_holding(session, "One more thing")

    def path(seq: int) -> Any:
        response = logged_in.get(reverse("ui:message_path", args=[session.pk, seq]))
        assert response.status_code == 200
        return response.json()["path"]

    assert path(first) == [nested.outer.number, nested.inner.number]
    assert path(archived) == [nested.outer.number]
    assert path(live) == []
    theirs = build_ui_session(other_user, title="Theirs").session
    missing = logged_in.get(reverse("ui:message_path", args=[theirs.pk, 0]))
    assert missing.status_code == 404
    assert logged_in.get(reverse("ui:message_path", args=[session.pk, 99999])).status_code == 404
