"""Offloads in the compaction log: their files (names, sizes, links) and Undo offload."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction, Session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import exchange, system
from tests.support.histories import user as user_message

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

OUTPUT = "a long tool output line\n" * 30


@pytest.fixture
def offloaded(logged_in: Client, user: Any) -> Session:
    session = create_session(
        user,
        messages=[
            system(),
            user_message("go"),
            *exchange("o1", "Read", {}, OUTPUT),
            *exchange("o2", "Bash", {}, OUTPUT * 2),
        ],
    )
    response = logged_in.post(
        reverse("ui:offload", args=[session.pk]), {"min_chars": "100"}, HTTP_HX_REQUEST="true"
    )
    assert b"Recorded as #1 in the compaction log" in response.content
    return session


def log_html(client: Client, session: Session) -> str:
    response = client.get(reverse("ui:tab", args=[session.pk, "log"]), HTTP_HX_REQUEST="true")
    return response.content.decode()


def test_the_log_shows_the_offload_with_its_files(logged_in: Client, offloaded: Session) -> None:
    html = log_html(logged_in, offloaded)
    assert 'data-offload="1"' in html
    for name, size in (("tool-result-o1.md", len(OUTPUT)), ("tool-result-o2.md", len(OUTPUT) * 2)):
        url = reverse("ui:offloaded", args=[offloaded.pk, name])
        assert f'href="{url}"' in html
        assert f'data-offload-file="{name}"' in html
        # Its size, as filesizeformat writes it (e.g. "720\xa0bytes", "1.4\xa0KB").
        assert re.search(rf'data-offload-file="{name}">{name}</a> <span class="muted">[\d.]+', html)
        assert logged_in.get(url).content.decode() == OUTPUT * (size // len(OUTPUT))
    assert "Undo offload" in html
    assert "2 results</small>" not in html
    assert " 2 results to files</small>" in html
    assert "Before / after" not in html  # nothing was summarized
    session = Session.objects.get(pk=offloaded.pk)
    assert session.compaction_count == 0


def test_undo_offload_puts_the_results_back(logged_in: Client, offloaded: Session) -> None:
    response = logged_in.post(reverse("ui:revert", args=[offloaded.pk, 1]), HTTP_HX_REQUEST="true")
    assert b"Undid offload #1" in response.content
    assert response["HX-Trigger-After-Settle"] == '{"session-changed": {}}'
    results = [
        block["content"]
        for message in runtime_messages(offloaded)
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results == [OUTPUT, OUTPUT * 2]
    html = log_html(logged_in, offloaded)
    assert "Undo offload" not in html
    assert "Undone" in html
    assert Compaction.objects.get(session=offloaded).status == "reverted"


def test_undo_needs_the_csrf_token(offloaded: Session, user: Any) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(reverse("ui:revert", args=[offloaded.pk, 1])).status_code == 403
    assert Compaction.objects.get(session=offloaded).status == "succeeded"


def test_the_log_shows_the_limits_in_force(logged_in: Client, offloaded: Session) -> None:
    record = Compaction.objects.get(session=offloaded)
    assert record.threshold_tokens is not None
    html = log_html(logged_in, offloaded)
    assert "data-limits-in-force" in html
    assert "Limits in force" in html


def test_an_offload_has_no_marker_in_the_history(logged_in: Client, offloaded: Session) -> None:
    history = logged_in.get(
        reverse("ui:tab", args=[offloaded.pk, "history"]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'data-compaction="1"' not in history
    api = logged_in.get(f"/api/sessions/{offloaded.pk}/history").json()
    assert api["compactions"] == []
    page = logged_in.get(reverse("ui:session", args=[offloaded.pk])).content.decode()
    # The timeline marks it, linking to its row in the log.
    assert 'href="?tab=log#log-1" class="drop drop-offload" data-drop="1"' in page
