"""The gauge's sentence about the agent's reported usage (issue 29 item 3): after a
compaction cleared `last_usage` it names the compaction that reset it, instead of "No usage
reported by the agent yet" beside messages that show their usage."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from compaction import ScriptedSummarizer
from sessions_app.models import Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import append_messages, create_session
from tests.support.histories import assistant
from tests.support.histories import user as say

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

USAGE = {"input_tokens": 5000, "output_tokens": 60}


def _gauge_source(client: Client, session: Session) -> str:
    html = client.get(reverse("ui:session", args=[session.pk])).content.decode()
    match = re.search(r'<p class="gauge-source[^"]*"[^>]*>(.*?)</p>', html, re.S)
    assert match is not None
    return match.group(1)


def test_a_compaction_that_cleared_the_usage_is_named(
    logged_in: Client, ui_session: UiSession
) -> None:
    session = ui_session.session
    more = [say(f"Step {n}: " + "look at src/parser.py again " * 12) for n in range(4)]
    append_messages(session, [*more, assistant("Done.", usage=USAGE)])
    session.refresh_from_db()
    assert session.last_usage is not None
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default="Short."))
    assert outcome.compaction is not None
    assert outcome.compaction.status == "succeeded", outcome.reason
    session.refresh_from_db()
    assert session.last_usage is None  # the change cleared it (services/sessions/state.py)

    text = _gauge_source(logged_in, session)
    assert "No usage reported by the agent yet" not in text
    assert 'data-stale-reported="5060"' in text
    assert f"reset by compaction #{outcome.compaction.number}" in text
    assert "data-reported-total" not in text  # the stale figure is not offered as current


def test_a_messages_usage_that_still_applies_is_shown(logged_in: Client, user: Any) -> None:
    session = create_session(
        user, title="Imported", messages=[say("Hi"), assistant("Hello!", usage=USAGE)]
    )
    Session.objects.filter(pk=session.pk).update(last_usage=None)
    session.refresh_from_db()

    text = _gauge_source(logged_in, session)
    assert 'data-reported-total="5060"' in text
    assert "(message #1)" in text
    assert "No usage reported by the agent yet" not in text


def test_without_any_usage_the_gauge_still_says_so(logged_in: Client, user: Any) -> None:
    session = create_session(user, title="Plain", messages=[say("Hi"), assistant("Yo")])
    assert "No usage reported by the agent yet." in _gauge_source(logged_in, session)
