"""sessions_app.services.compacting.writeback: snapshots, the optimistic commit, failures
recorded."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.storage import default_storage

from sessions_app.models import Compaction, ContextEntry, Session
from sessions_app.services.compacting.archives import read_archive
from sessions_app.services.compacting.failed_attempts import record_failure
from sessions_app.services.compacting.writeback import (
    CommitMeta,
    commit_context,
    take_snapshot,
)
from sessions_app.services.errors import Conflict, InvariantError, ServiceError

pytestmark = pytest.mark.django_db


def positions(session: Session) -> list[tuple[int, str]]:
    rows = ContextEntry.objects.filter(session=session).order_by("position")
    return [(e.position, e.kind) for e in rows]


def summary(text: str = "the middle, summarized") -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.fixture
def session(make_session: Any, conversation: Any) -> Session:
    made: Session = make_session(messages=conversation(3))
    return made


def test_a_trailing_unanswered_tool_call_is_pending(make_session: Any) -> None:
    call = {"type": "tool_use", "id": "t1", "name": "read", "input": {}}
    made = make_session(
        messages=[{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]}]
    )
    snapshot = take_snapshot(made)
    assert [e.role for e in snapshot.entries] == ["user"]
    assert [e.role for e in snapshot.pending] == ["assistant"]
    assert snapshot.tokens == sum(e.token_count for e in [*snapshot.entries, *snapshot.pending])


def test_commit_replaces_the_middle_and_archives_it(session: Session) -> None:
    snapshot = take_snapshot(session)
    first, *middle, last = snapshot.messages
    revision = session.context_revision

    compaction = commit_context(snapshot, [first, summary(), last], CommitMeta(trigger="manual"))

    assert [kind for _, kind in positions(session)] == ["message", "message", "message"]
    new = ContextEntry.objects.get(session=session, compaction=compaction)
    assert new.position == snapshot.entries[1].position, "the first freed position"
    archive = read_archive(compaction)
    assert [e.id for e in archive.entries] == [e.pk for e in snapshot.entries[1:-1]]
    assert archive.header.compaction == compaction.number == 1
    assert (compaction.messages_before, compaction.messages_after) == (len(middle) + 2, 3)
    session.refresh_from_db()
    assert session.context_revision == revision + 1
    assert session.last_usage is None


def test_a_commit_after_another_change_conflicts_and_changes_nothing(session: Session) -> None:
    stale = take_snapshot(session)
    fresh = take_snapshot(session)
    commit_context(fresh, [fresh.messages[0], summary()], CommitMeta(trigger="manual"))
    before = positions(session)

    with pytest.raises(Conflict):
        commit_context(stale, [stale.messages[0], summary("late")], CommitMeta(trigger="auto"))

    assert positions(session) == before
    assert Compaction.objects.filter(session=session).count() == 1


def test_reordered_entries_are_a_broken_invariant_not_bad_input(session: Session) -> None:
    snapshot = take_snapshot(session)
    before = positions(session)
    reordered = [snapshot.messages[1], snapshot.messages[0]]

    with pytest.raises(InvariantError) as info:
        commit_context(snapshot, reordered, CommitMeta(trigger="manual"))

    assert not isinstance(info.value, ServiceError | ValueError)
    assert positions(session) == before
    folder = f"archives/{session.pk}"
    assert not default_storage.exists(folder) or default_storage.listdir(folder)[1] == []


def test_a_failure_is_recorded_without_touching_the_context(session: Session) -> None:
    before = positions(session)
    meta = CommitMeta(trigger="auto", instructions="keep\x00ids")

    failed = record_failure(session, meta, "api_error", tokens_before=120, messages=6)

    assert failed is not None
    assert (failed.status, failed.failure_reason, failed.number) == ("failed", "api_error", 1)
    assert failed.instructions == "keepids", "a NUL cannot be stored; the record is kept"
    assert (failed.tokens_before, failed.tokens_after) == (120, 120)
    assert positions(session) == before


def test_a_failure_of_a_deleted_session_is_not_recorded(session: Session) -> None:
    Session.objects.filter(pk=session.pk).delete()
    assert record_failure(session, CommitMeta(trigger="auto"), "api_error") is None
