"""What the pages say about numbers: signed changes, singular counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

MINUS = "\u2212"


def test_marker_shows_growth_with_a_plus_and_savings_with_a_minus(
    ui_session: UiSession, logged_in: Client
) -> None:
    outer = ui_session.outer
    Compaction.objects.filter(pk=outer.pk).update(tokens_before=100, tokens_after=218)
    html = logged_in.get(
        reverse("ui:tab", args=[ui_session.session.pk, "history"]), HTTP_HX_REQUEST="true"
    ).content
    text = html.decode()
    assert '<span class="growth">(+118%)</span>' in text
    assert f"({MINUS}0%)" not in text
    Compaction.objects.filter(pk=outer.pk).update(tokens_before=1000, tokens_after=660)
    again = logged_in.get(
        reverse("ui:tab", args=[ui_session.session.pk, "history"]), HTTP_HX_REQUEST="true"
    ).content
    assert f'<span class="saving">({MINUS}34%)</span>' in again.decode()


def test_counts_of_one_are_singular(ui_session: UiSession, logged_in: Client) -> None:
    session = ui_session.session
    type(session).objects.filter(pk=session.pk).update(message_count=1, context_entry_count=1)
    text = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert "1 message<" in text
    assert "1 entry<" in text
    assert "1 messages" not in text
    assert "1 entries" not in text
