"""Migration 0014 merges the duplicate sessions earlier versions stored (issue 23): a proxied
conversation and its "(continued)" twin holding it all again, a watched subagent stored twice
under one parent. The earliest id is kept, nothing is lost, non-duplicates are untouched."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone

from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.sessions.lifecycle import create_session

pytestmark = pytest.mark.django_db

migration = importlib.import_module("sessions_app.migrations.0014_merge_duplicate_sessions")

CALL: Any = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}


def _conversation(turns: int) -> list[dict[str, Any]]:
    """user / assistant tool call / tool result ... as a proxy stores them."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test"}]
    for turn in range(turns):
        call = {**CALL, "id": f"toolu_{turn}"}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": f"out {turn}"}
        history += [
            {"role": "assistant", "content": [{"type": "text", "text": f"step {turn}"}, call]},
            {"role": "user", "content": [result]},
        ]
    return history


def _as_resent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same messages as a client re-sent them: a string as one text block, a moved
    `cache_control` breakpoint."""
    copies: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        else:
            content = [{**block, "cache_control": {"type": "ephemeral"}} for block in content]
        copies.append({**message, "content": content})
    return copies


def _stored(owner: Any, messages: list[dict[str, Any]], age: int, **fields: Any) -> Session:
    """A session as an earlier version stored it, `age` minutes old."""
    session = create_session(owner, messages=messages, title=fields.pop("title", "Fix it"))
    Session.objects.filter(pk=session.pk).update(
        created_at=timezone.now() - timedelta(minutes=age), **fields
    )
    session.refresh_from_db()
    return session


def _contents(session: Session) -> list[Any]:
    return [m.as_dict() for m in Message.objects.filter(session=session).order_by("seq")]


def _compacted(session: Session) -> Compaction:
    return Compaction.objects.create(
        session=session, number=1, created_at=timezone.now(), trigger="manual"
    )


def test_a_proxied_continued_twin_is_merged_into_the_earliest(user: Any, capsys: Any) -> None:
    proxied = {"proxy_key": "cc:abc", "proxy_state": {"map": {"count": 5}}}
    first = _stored(user, _conversation(2), 10, **proxied)
    full = _conversation(4)
    twin_rows = [*_as_resent(full[:5]), *full[5:]]
    twin_state = {"proxy_key": "cc:abc", "proxy_state": {"map": {"count": 9}}}
    twin = _stored(user, twin_rows, 5, title="Fix it (continued)", **twin_state)
    subagent = _stored(user, [{"role": "user", "content": "Find it"}], 4, parent=twin)
    migration.merge_duplicates(apps, None)
    assert "merged 1 duplicate sessions (skipped 0)" in capsys.readouterr().out
    assert not Session.objects.filter(pk=twin.pk).exists()
    merged = Session.objects.get(pk=first.pk)
    assert _contents(merged) == full  # the first one's own rows, then the twin's new ones
    assert list(Message.objects.filter(session=merged).values_list("seq", flat=True)) == list(
        range(9)
    )
    entries = ContextEntry.objects.filter(session=merged).order_by("position")
    assert [e.message.seq for e in entries if e.message] == list(range(9))
    assert [e.position for e in entries] == list(range(9))
    assert (merged.message_count, merged.context_entry_count, merged.next_seq) == (9, 9, 9)
    assert merged.history_tokens == sum(m.token_count for m in merged.messages.all())
    assert merged.proxy_state == {"map": {"count": 9}}  # the client continues the twin
    assert merged.title == "Fix it"
    assert Session.objects.get(pk=subagent.pk).parent_id == first.pk


def test_a_real_continuation_and_other_sessions_are_untouched(user: Any, other_user: Any) -> None:
    first = _stored(user, _conversation(2), 10, proxy_key="cc:abc")
    after_compact = [{"role": "user", "content": "Summary of the work so far; go on"}]
    real = _stored(user, after_compact, 5, title="Fix it (continued)", proxy_key="cc:abc")
    # Another owner's twin, and a twin of another key, are not this conversation.
    others = [
        _stored(other_user, _conversation(3), 4, title="Fix it (continued)", proxy_key="cc:abc"),
        _stored(user, _conversation(3), 3, title="Fix it (continued)", proxy_key="cc:zzz"),
        _stored(user, _conversation(3), 2, title="Fix it"),  # an API session
    ]
    before = {s.pk: _contents(s) for s in [first, real, *others]}
    migration.merge_duplicates(apps, None)
    assert {s.pk: _contents(s) for s in Session.objects.all()} == before


def test_a_pair_both_compacted_is_skipped_and_counted(user: Any) -> None:
    first = _stored(user, _conversation(2), 10, proxy_key="cc:abc")
    twin = _stored(user, _conversation(3), 5, title="Fix it (continued)", proxy_key="cc:abc")
    _compacted(first), _compacted(twin)
    report = migration.merge_duplicate_sessions(migration.DedupeModels.of(apps))
    assert (report.merged, report.skipped) == (0, 1)
    assert Session.objects.count() == 2


def test_a_compacted_twin_brings_its_rows_under_the_earliest_id(user: Any) -> None:
    first = _stored(user, _conversation(2), 10, proxy_key="cc:abc")
    twin = _stored(user, _conversation(3), 5, title="Fix it (continued)", proxy_key="cc:abc")
    compaction = _compacted(twin)
    migration.merge_duplicates(apps, None)
    merged = Session.objects.get()
    assert merged.pk == first.pk
    assert _contents(merged) == _conversation(3)
    assert Compaction.objects.get(pk=compaction.pk).session_id == first.pk
    assert merged.compaction_count == 1


def test_a_subagent_stored_twice_under_one_parent_is_merged(user: Any, capsys: Any) -> None:
    parent = _stored(user, _conversation(1), 20, title="Main")
    found = [{"role": "user", "content": "Find the test"}, *_conversation(3)[1:]]
    early = _stored(user, found[:3], 10, title="Find", parent=parent, parent_tool_use_id="t1")
    again = _stored(user, found, 5, title="Find", parent=parent, parent_tool_use_id="t1")
    grand = _stored(user, [{"role": "user", "content": "deeper"}], 4, parent=again)
    other_call = _stored(user, found, 3, title="Find", parent=parent, parent_tool_use_id="t2")
    other = _stored(user, [{"role": "user", "content": "Other"}], 2, parent=parent)
    migration.merge_duplicates(apps, None)
    assert "merged 1 duplicate sessions" in capsys.readouterr().out
    assert not Session.objects.filter(pk=again.pk).exists()
    assert _contents(Session.objects.get(pk=early.pk)) == found
    assert Session.objects.get(pk=grand.pk).parent_id == early.pk
    assert set(Session.objects.filter(parent=parent).values_list("pk", flat=True)) == {
        early.pk,
        other_call.pk,
        other.pk,
    }


def test_diverging_subagents_are_skipped(user: Any, capsys: Any) -> None:
    parent = _stored(user, _conversation(1), 20, title="Main")
    found = [{"role": "user", "content": "Find the test"}, *_conversation(2)[1:]]
    edited = [*found[:3], {"role": "assistant", "content": "something else"}]
    _stored(user, found, 10, parent=parent)
    _stored(user, edited, 5, parent=parent)
    report = migration.merge_duplicate_sessions(migration.DedupeModels.of(apps))
    assert (report.merged, report.skipped) == (0, 1)
    migration.merge_duplicates(apps, None)
    assert capsys.readouterr().out == ""  # nothing merged: nothing said
    assert Session.objects.filter(parent=parent).count() == 2


def test_reversing_is_a_no_op() -> None:
    (operation,) = migration.Migration.operations
    assert operation.reversible
