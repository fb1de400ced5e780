"""What a summary lost: the identifiers of a compaction's originals it does not mention."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from compaction import extract_identifiers
from sessions_app.models import Compaction
from sessions_app.selectors.retention import LostIdentifiers, lost_identifiers
from sessions_app.services.compacting.archives import read_archive

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def _without_state(compaction: Compaction) -> None:
    """The summary without the state block the engine appends (tested in
    test_retention_state.py), so that it loses paths."""
    compaction.summary = compaction.summary.split("<session-state>")[0]


def test_lists_the_originals_identifiers_the_summary_omits(ui_session: UiSession) -> None:
    inner = ui_session.inner
    _without_state(inner)
    originals = [dict(e.message) for e in read_archive(inner).entries]

    lost = lost_identifiers(inner)

    assert lost.source == "archive"
    assert lost.total == len(extract_identifiers(originals)) > 0
    identifiers = extract_identifiers(originals)
    assert lost.missing == tuple(i for i in identifiers if i not in inner.summary)
    assert "src/app/models.py" in lost.missing  # a path the originals name
    assert lost.kept == lost.total - len(lost.missing)
    assert lost.recall == pytest.approx(lost.kept / lost.total)


def test_the_stored_history_stands_in_for_a_missing_archive(ui_session: UiSession) -> None:
    inner = ui_session.inner
    _without_state(inner)
    from_archive = lost_identifiers(inner)
    Compaction.objects.filter(pk=inner.pk).update(archive="")
    inner.refresh_from_db()
    _without_state(inner)

    lost = lost_identifiers(inner)

    assert lost.source == "history"
    assert "src/app/models.py" in lost.missing
    assert set(lost.missing) <= set(from_archive.missing)


def test_an_unreadable_archive_falls_back_to_the_history(ui_session: UiSession) -> None:
    inner = ui_session.inner
    Compaction.objects.filter(pk=inner.pk).update(archive="archives/not-there.json")
    inner.refresh_from_db()

    assert lost_identifiers(inner).source == "history"


def test_nothing_to_compare_without_archive_or_range(ui_session: UiSession) -> None:
    inner = ui_session.inner
    Compaction.objects.filter(pk=inner.pk).update(archive="", first_seq=None, last_seq=None)
    inner.refresh_from_db()

    lost = lost_identifiers(inner)

    assert lost == LostIdentifiers(total=0, missing=(), source="none")
    assert lost.recall is None


def test_a_summary_that_names_everything_lost_nothing(ui_session: UiSession) -> None:
    inner = ui_session.inner
    originals = [dict(e.message) for e in read_archive(inner).entries]
    inner.summary = "\n".join(extract_identifiers(originals))

    lost = lost_identifiers(inner)

    assert lost.missing == ()
    assert lost.recall == 1.0
