"""What a summary lost of the session state, by the engine's definitions (issue 27): the
touched files, todo items and unresolved errors of `compaction.state_recall`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.test import Client
from django.urls import reverse

from compaction import state_recall
from sessions_app.models import Compaction
from sessions_app.selectors.retention import lost_identifiers
from sessions_app.services.compacting.archives import read_archive

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def test_a_summary_made_by_the_engine_keeps_the_whole_state(ui_session: UiSession) -> None:
    """The engine appends the state block to every summary, a scripted one too."""
    inner = ui_session.inner
    originals = [dict(e.message) for e in read_archive(inner).entries]

    lost = lost_identifiers(inner)

    assert state_recall(originals, []).files  # the originals touched files
    assert "<session-state>" in inner.summary
    assert lost.missing_files == lost.missing_todos == lost.missing_errors == ()
    assert lost.missing_state == ()


def test_a_summary_without_the_state_lists_what_it_lost(ui_session: UiSession) -> None:
    inner = ui_session.inner
    originals = [dict(e.message) for e in read_archive(inner).entries]
    inner.summary = "Goals and key decisions:\n- none"

    lost = lost_identifiers(inner)

    expected = state_recall(originals, [])
    assert lost.missing_files == expected.files
    assert lost.missing_errors == expected.errors
    assert next(kind for kind, _ in lost.missing_state) == "touched files"


def test_a_brace_group_keeps_each_of_its_paths(ui_session: UiSession) -> None:
    inner = ui_session.inner
    inner.summary = "- src/{app,models}.py: modified"

    lost = lost_identifiers(inner)

    assert "src/app.py" not in lost.missing
    assert "src/app.py" not in lost.missing_files


def test_the_lost_partial_lists_the_state_a_summary_lost(
    ui_session: UiSession, logged_in: Client
) -> None:
    inner = ui_session.inner
    Compaction.objects.filter(pk=inner.pk).update(summary="Goals and key decisions:\n- none")
    url = reverse("ui:compaction_lost", args=[ui_session.session.pk, inner.number])

    html = logged_in.get(url).content.decode()

    assert 'data-lost-state="touched files"' in html
    assert "<code>src/module_1.py</code>" in html
