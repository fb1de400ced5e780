"""Runtime-context entries and offloaded files."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessions_app.models import ContextEntry
from sessions_app.selectors.entries import (
    compare_entries,
    entries_with_messages,
    entry_tokens,
    in_context_message_ids,
)
from sessions_app.selectors.files import offloaded_file
from sessions_app.services.errors import NotFound

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def test_entries_in_position_order(ui_session: UiSession) -> None:
    session = ui_session.session
    stored = list(ContextEntry.objects.filter(session=session).order_by("position"))
    rows = compare_entries(session)
    assert [r["position"] for r in rows] == [e.position for e in stored]
    assert [t[2] for t in entry_tokens(session)] == [e.token_count for e in stored]
    picked = entries_with_messages(session, [e.pk for e in reversed(stored)])
    assert [e.pk for e in picked] == [e.pk for e in stored]
    message_ids = [e.message_id for e in stored if e.message_id is not None]
    assert in_context_message_ids(session, message_ids) == set(message_ids)


def test_an_unreadable_offloaded_name_is_not_found(ui_session: UiSession) -> None:
    for name in ("missing.txt", "../../etc/passwd"):
        with pytest.raises(NotFound):
            offloaded_file(ui_session.session, name)
