"""sessions_app.services.sessions.lifecycle: create, append (validation, token counts), delete,
isolation."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction import message_token_counts
from sessions_app.models import ContextEntry, Message, Session
from sessions_app.services.errors import InvalidInput, VersionConflict
from sessions_app.services.sessions.lifecycle import (
    append_messages,
    create_session,
    delete_session,
    sessions_for,
)
from tests.support.histories import assistant, tool_call, tool_results
from tests.support.histories import user as user_msg

pytestmark = pytest.mark.django_db


def test_create_session_stores_history_context_and_cached_totals(
    user: Any, conversation: Any
) -> None:
    messages = conversation(3)
    session = create_session(user, title="t", messages=messages)
    counts = message_token_counts(messages, "o200k_base")
    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert [r.seq for r in rows] == list(range(len(messages)))
    assert [r.token_count for r in rows] == counts
    assert [r.as_dict() for r in rows] == messages
    assert ContextEntry.objects.filter(session=session).count() == len(messages)
    session.refresh_from_db()
    assert session.history_tokens == session.context_tokens == sum(counts)
    assert session.message_count == session.context_entry_count == len(messages)
    assert session.version == 1


def test_create_session_with_system_prompt_puts_it_first(user: Any) -> None:
    session = create_session(user, system="Be brief.", messages=[user_msg("hi")])
    first = Message.objects.get(session=session, seq=0)
    assert (first.role, first.content) == ("system", "Be brief.")


def test_invalid_messages_raise_with_paths_relative_to_the_request_and_store_nothing(
    user: Any,
) -> None:
    bad = [
        user_msg("hi"),
        tool_call("t1"),
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
    ]
    with pytest.raises(InvalidInput) as info:
        create_session(user, system="s", messages=bad)
    paths = [p.path for p in info.value.problems]
    assert "messages[2].content[0].tool_use_id" in paths
    assert not Session.objects.exists()


def test_unknown_profile_is_invalid_input_on_profile(user: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        create_session(user, profile="nope")
    assert info.value.first.path == "profile"


def test_append_accepts_the_answer_to_a_pending_tool_call(user: Any) -> None:
    session = create_session(user, messages=[user_msg("read it"), tool_call("t1")])
    rows = append_messages(session, [tool_results(("t1", "content")), assistant("done")])
    assert [r.seq for r in rows] == [2, 3]
    assert session.version == 2
    assert session.message_count == 4


def test_append_after_a_stored_tool_result_accepts_the_next_turn(user: Any) -> None:
    session = create_session(
        user, messages=[user_msg("read it"), tool_call("t1"), tool_results(("t1", "content"))]
    )
    rows = append_messages(session, [assistant("done")])
    assert [r.seq for r in rows] == [3]
    session.refresh_from_db()
    assert session.message_count == 4


def test_append_refuses_a_message_that_ignores_the_pending_tool_call(user: Any) -> None:
    session = create_session(user, messages=[user_msg("read it"), tool_call("t1")])
    with pytest.raises(InvalidInput) as info:
        append_messages(session, [user_msg("something else")])
    assert info.value.problems[0].path == "messages[0]"
    assert "t1" in info.value.problems[0].message
    session.refresh_from_db()
    assert session.message_count == 2
    assert session.version == 1


def test_append_reports_block_paths_relative_to_the_appended_list(user: Any) -> None:
    session = create_session(user, messages=[user_msg("hi"), assistant("hello")])
    bad = [{"role": "user", "content": [{"type": "text", "text": "ok"}, {"type": "bogus"}]}]
    with pytest.raises(InvalidInput) as info:
        append_messages(session, bad)
    assert info.value.problems[0].path == "messages[0].content[1].type"


def test_append_with_a_stale_expected_version_conflicts(user: Any) -> None:
    session = create_session(user, messages=[user_msg("hi")])
    with pytest.raises(VersionConflict):
        append_messages(session, [assistant("x")], expected_version=0)
    append_messages(session, [assistant("x")], expected_version=1)
    assert session.version == 2


def test_extra_keys_are_kept_and_id_becomes_original_id(user: Any) -> None:
    message = {"role": "user", "content": "hi", "id": "m-1", "created_at": "2024-01-02T03:04:05Z"}
    session = create_session(user, messages=[message])
    row = Message.objects.get(session=session)
    assert row.original_id == "m-1"
    assert row.created_at.year == 2024
    assert row.as_dict() == message


def test_sessions_for_isolates_owners(user: Any, other_user: Any) -> None:
    mine = create_session(user)
    create_session(other_user)
    assert list(sessions_for(user)) == [mine]
    assert list(sessions_for(None)) == []


def test_delete_session_removes_everything(user: Any, conversation: Any) -> None:
    session = create_session(user, messages=conversation(2))
    delete_session(session)
    assert not Session.objects.exists()
    assert not Message.objects.exists()
    assert not ContextEntry.objects.exists()


def test_delete_session_reads_the_archives_after_locking_the_session(
    user: Any, conversation: Any
) -> None:
    session = create_session(user, messages=conversation(2))
    with CaptureQueriesContext(connection) as queries:
        delete_session(session)
    sql = [query["sql"] for query in queries.captured_queries]
    begin = next(i for i, q in enumerate(sql) if q.upper().startswith(("BEGIN", "SAVEPOINT")))
    lock = next(i for i, q in enumerate(sql) if "sessions_app_session" in q)
    archives = next(i for i, q in enumerate(sql) if '"archive"' in q)
    assert begin < lock < archives, "the archive names are read inside the transaction"
    if connection.features.has_select_for_update:
        assert "FOR UPDATE" in sql[lock]


def test_delete_session_removes_its_stored_context_responses(user: Any, conversation: Any) -> None:
    from sessions_app.services.context import store as context_store
    from sessions_app.services.context.runtime import context_body

    session = create_session(user, messages=conversation(2))
    context_body(session)
    stored = list(context_store.store_dir().glob(f"{session.pk}.*"))
    assert stored, "the response was not kept as a file"
    delete_session(session)
    assert not any(path.exists() for path in stored)


def test_an_appended_reply_records_its_usage_in_the_append(user: Any) -> None:
    session = create_session(user, title="t", messages=[user_msg("hi")])
    reply = assistant("x", usage={"input_tokens": 900, "output_tokens": 50})

    append_messages(session, iter([reply, user_msg("thanks")]))  # any iterable, read once

    stored = Session.objects.get(pk=session.pk).last_usage
    assert stored is not None
    assert stored["total_tokens"] == 950
    assert session.last_usage == stored


def test_a_refused_append_keeps_the_last_usage(user: Any) -> None:
    session = create_session(user, title="t", messages=[user_msg("hi")])
    reply = assistant("x", usage={"input_tokens": 900, "output_tokens": 50})
    with pytest.raises(InvalidInput):  # a tool message answering no call
        append_messages(session, [reply, {"role": "tool", "content": "orphan"}])
    assert Session.objects.get(pk=session.pk).last_usage is None


def _append_meanwhile(
    monkeypatch: pytest.MonkeyPatch, session: Session, messages: list[dict[str, Any]]
) -> None:
    """Have `messages` appended by "another request" after an append validated and counted
    its messages, before its transaction began (lifecycle counts just before it)."""
    from sessions_app.services.sessions import lifecycle

    counted = message_token_counts
    done: list[bool] = []

    def count_then_let_another_in(items: Any, encoding: str) -> list[int]:
        if not done:
            done.append(True)
            append_messages(Session.objects.get(pk=session.pk), messages)
        return counted(items, encoding)

    monkeypatch.setattr(lifecycle, "message_token_counts", count_then_let_another_in)


def test_an_append_checked_before_another_is_checked_again_against_it(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation happens before the transaction; when another append got in between, the
    messages are validated again against the context as it is now, and nothing is stored."""
    session = create_session(user, messages=[user_msg("read it"), tool_call("t1")])
    _append_meanwhile(monkeypatch, session, [tool_results(("t1", "content")), assistant("done")])
    late = [tool_results(("t1", "again"))]  # answered already: no call is pending now
    with pytest.raises(InvalidInput) as info:
        append_messages(session, late)
    assert info.value.problems[0].path == "messages[0]"
    stored = Session.objects.get(pk=session.pk)
    assert stored.message_count == 4
    assert [m.seq for m in Message.objects.filter(session=session)] == [0, 1, 2, 3]


def test_an_append_still_valid_after_another_lands_after_it(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = create_session(user, messages=[user_msg("hi"), assistant("hello")])
    _append_meanwhile(monkeypatch, session, [user_msg("first"), assistant("one")])
    rows = append_messages(session, [user_msg("second")])
    assert [r.seq for r in rows] == [4]
    assert session.version == 3
    assert session.message_count == 5


def test_the_transaction_holds_only_the_writes_when_nothing_changed_meanwhile(
    user: Any,
) -> None:
    """The write lock is held for the lock of the row, two INSERTs and one UPDATE: the
    validation's read and the profile's come before BEGIN."""
    session = create_session(user, messages=[user_msg("hi"), assistant("hello")])
    with CaptureQueriesContext(connection) as queries:
        append_messages(session, [user_msg("again"), assistant("sure")])
    sql = [q["sql"].split()[0].upper() for q in queries.captured_queries]
    begin = next(i for i, s in enumerate(sql) if s in {"BEGIN", "SAVEPOINT"})
    inside = [s for s in sql[begin + 1 :] if s not in {"RELEASE", "COMMIT"}]
    assert inside == ["SELECT", "INSERT", "INSERT", "UPDATE"]
