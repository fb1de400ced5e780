"""sessions_app.services.context.text: the assembled context JSON, cached per session state.

A repeated read is served from the cache without reading the entries; every change to the
entries (append, compaction, revert, offload) makes the next read return the new state,
byte for byte what an uncached build returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction import ScriptedSummarizer
from sessions_app.models import Session
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context import rows as context_rows
from sessions_app.services.context import store as context_store
from sessions_app.services.context import text as context_text_module
from sessions_app.services.context.runtime import Format, context_body, context_payload
from sessions_app.services.context.text import clear_cache
from sessions_app.services.sessions.lifecycle import append_messages
from tests.support.histories import assistant, exchange, user

pytestmark = pytest.mark.django_db

FORMATS = pytest.mark.parametrize("fmt", ["anthropic", "openai"])
BIG = "line of tool output\n" * 50
BIG_JSON = json.dumps(BIG).encode()[1:-1]  # as it appears inside the JSON body


#: The rows reader as the context text module calls it.
TEXT_RAW_ROWS = "sessions_app.services.context.text.raw_rows"


def uncached(session: Session, fmt: Format = "anthropic") -> bytes:
    """The body built from scratch (no cached text to reuse)."""
    clear_cache()
    return context_body(session, fmt)


def entry_queries(read: Callable[[], Any]) -> int:
    """How many queries `read` makes on the context entries."""
    with CaptureQueriesContext(connection) as queries:
        read()
    return sum("sessions_app_contextentry" in query["sql"] for query in queries)


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


@FORMATS
def test_a_repeated_read_comes_from_the_cache(session: Session, fmt: Format) -> None:
    first = context_body(session, fmt)
    assert entry_queries(lambda: context_body(session, fmt)) == 0
    assert context_body(session, fmt) == first
    assert json.loads(first) == context_payload(session, fmt).to_dict()


@FORMATS
def test_an_append_invalidates_the_cached_context(session: Session, fmt: Format) -> None:
    before = context_body(session, fmt)
    append_messages(session, [user("one more question")])

    after = context_body(session, fmt)

    assert after != before
    assert json.loads(after)["messages"][-1] == {"role": "user", "content": "one more question"}
    assert after == uncached(session, fmt)


@FORMATS
def test_after_an_append_only_the_new_entries_are_read(session: Session, fmt: Format) -> None:
    context_body(session, fmt)
    append_messages(session, [user("next")])
    with CaptureQueriesContext(connection) as queries:
        extended = context_body(session, fmt)
    entry_sql = [q["sql"] for q in queries if "sessions_app_contextentry" in q["sql"]]
    assert len(entry_sql) == 1
    assert "position" in entry_sql[0].split("WHERE", 1)[1], "a read of the new positions only"
    append_messages(session, [assistant("answer")])
    assert context_body(session, fmt) == uncached(session, fmt)
    assert extended != context_body(session, fmt)


def test_an_append_after_only_system_messages_rebuilds_the_system_prompt(
    make_session: Any,
) -> None:
    session = make_session(messages=[{"role": "system", "content": "first"}])
    context_body(session)
    append_messages(session, [{"role": "system", "content": "second"}, user("hi")])
    body = json.loads(context_body(session))
    assert body["system"] == "first\n\nsecond"
    assert body["messages"] == [{"role": "user", "content": "hi"}]


@FORMATS
def test_a_compaction_invalidates_the_cached_context(session: Session, fmt: Format) -> None:
    before = context_body(session, fmt)
    compact_session(session, summarizer=ScriptedSummarizer(default="THE SUMMARY"))

    after = context_body(session, fmt)

    assert after != before
    assert b"THE SUMMARY" in after
    assert json.loads(after)["tokens"] == session.context_tokens
    assert after == uncached(session, fmt)


@FORMATS
def test_a_revert_invalidates_the_cached_context(session: Session, fmt: Format) -> None:
    original = context_body(session, fmt)
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default="THE SUMMARY"))
    assert outcome.compaction is not None
    compacted = context_body(session, fmt)

    revert_compaction(session, outcome.compaction.number)

    after = context_body(session, fmt)
    assert after != compacted
    assert after == original == uncached(session, fmt)


@FORMATS
def test_an_offload_invalidates_the_cached_context(make_session: Any, fmt: Format) -> None:
    session = make_session(messages=[user("go"), *exchange("t1", result=BIG), assistant("ok")])
    before = context_body(session, fmt)
    assert offload_session(session).offloaded_count == 1

    after = context_body(session, fmt)

    assert BIG_JSON in before
    assert BIG_JSON not in after
    assert b"tool-result-t1.md" in after
    assert after == uncached(session, fmt)


def test_limit_and_usage_follow_a_profile_change_on_a_cached_read(
    make_session: Any, make_profile: Any, conversation: Any
) -> None:
    profile = make_profile(context_limit=100_000)
    session = make_session(messages=conversation(2), profile=profile)
    assert json.loads(context_body(session))["limit"] == 100_000
    profile.context_limit = 50_000
    profile.save()
    body = json.loads(context_body(session))
    assert body["limit"] == 50_000
    assert body["usage"] == round(session.context_tokens / 50_000, 6)


def test_a_compaction_while_new_entries_are_read_is_not_spliced_in(
    session: Session, monkeypatch: Any
) -> None:
    context_body(session)
    append_messages(session, [user("next")])
    read_rows = context_rows.raw_rows

    def compaction_first(target: Session, *, after: int | None = None) -> Any:
        if after is not None:  # the read of the appended entries: a compaction wins first
            compact_session(target, summarizer=ScriptedSummarizer(default="RACED SUMMARY"))
        return read_rows(target, after=after)

    monkeypatch.setattr(TEXT_RAW_ROWS, compaction_first)
    body = context_body(session)
    monkeypatch.undo()

    assert b"RACED SUMMARY" in body
    assert body == uncached(session), "the compacted state, not old entries plus new ones"


def test_a_change_while_the_context_is_built_is_not_cached_as_the_old_state(
    session: Session, monkeypatch: Any
) -> None:
    read_rows = context_rows.raw_rows
    stored: list[Any] = []

    def append_after_reading(target: Session, *, after: int | None = None) -> Any:
        rows = read_rows(target, after=after)
        append_messages(target, [user("raced")])
        return rows

    monkeypatch.setattr(TEXT_RAW_ROWS, append_after_reading)
    monkeypatch.setattr(context_text_module._cache, "put", lambda *args: stored.append(args))
    context_body(session)
    assert stored == [], "built from a state the stamp no longer names"


def test_with_no_cache_budget_every_read_builds(session: Session, settings: Any) -> None:
    settings.CTXWEB_CONTEXT_CACHE_BYTES = 0
    first = context_body(session)
    assert entry_queries(lambda: context_body(session)) == 1
    assert context_body(session) == first


def test_a_context_larger_than_the_budget_is_served_but_not_kept(
    session: Session, settings: Any
) -> None:
    settings.CTXWEB_CONTEXT_CACHE_BYTES = 1000
    first = context_body(session)
    assert len(first) > 1000
    assert entry_queries(lambda: context_body(session)) == 1
    settings.CTXWEB_CONTEXT_CACHE_BYTES = len(first) * 2
    context_body(session)
    assert entry_queries(lambda: context_body(session)) == 0


def test_the_api_returns_the_cached_bytes(api_client: Any, user: Any, conversation: Any) -> None:
    from sessions_app.services.sessions.lifecycle import create_session

    session = create_session(user, messages=conversation(3))
    first = api_client.get(f"/api/sessions/{session.pk}/context")
    second = api_client.get(f"/api/sessions/{session.pk}/context?format=anthropic")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content == uncached(session)


@FORMATS
def test_a_fresh_process_reads_the_stored_response(session: Session, fmt: Format) -> None:
    first = context_body(session, fmt)
    clear_cache(stored=False)  # what a new process finds: nothing in memory, the file kept
    assert entry_queries(lambda: context_body(session, fmt)) == 0
    assert context_body(session, fmt) == first


@FORMATS
def test_a_stored_response_is_extended_after_appends(session: Session, fmt: Format) -> None:
    context_body(session, fmt)
    append_messages(session, [user("one more question")])
    clear_cache(stored=False)
    with CaptureQueriesContext(connection) as queries:
        extended = context_body(session, fmt)
    entry_sql = [q["sql"] for q in queries if "sessions_app_contextentry" in q["sql"]]
    assert len(entry_sql) == 1
    assert "position" in entry_sql[0].split("WHERE", 1)[1], "a read of the new positions only"
    assert extended == uncached(session, fmt)


@FORMATS
def test_a_stored_response_of_an_older_revision_is_not_served(
    session: Session, fmt: Format
) -> None:
    before = context_body(session, fmt)
    compact_session(session, summarizer=ScriptedSummarizer(default="THE SUMMARY"))
    clear_cache(stored=False)
    after = context_body(session, fmt)
    assert after != before
    assert b"THE SUMMARY" in after
    assert after == uncached(session, fmt)


def test_a_damaged_stored_response_is_rebuilt(session: Session) -> None:
    first = context_body(session)
    clear_cache(stored=False)
    for path in context_store.store_dir().glob(f"{session.pk}.*"):
        path.write_bytes(path.read_bytes()[:-10])  # a partial write
    assert context_body(session) == first


def test_limit_changes_are_served_from_the_cached_response(
    make_session: Any, make_profile: Any, conversation: Any
) -> None:
    profile = make_profile(context_limit=100_000)
    session = make_session(messages=conversation(2), profile=profile)
    context_body(session)
    profile.context_limit = 50_000
    profile.save()
    assert entry_queries(lambda: context_body(session)) == 0
    assert json.loads(context_body(session))["limit"] == 50_000
    assert context_body(session) == uncached(session)


def test_a_proxied_sessions_overhead_is_part_of_the_cached_response(
    make_session: Any, conversation: Any
) -> None:
    session = make_session(messages=conversation(2))
    overhead = {"system_tokens": 40, "tools_tokens": 300}
    Session.objects.filter(pk=session.pk).update(proxy_state=overhead)
    session.refresh_from_db()
    first = context_body(session)
    assert json.loads(first)["tokens"] == session.context_tokens + 340
    assert context_body(session) is first, "the cached bytes, not joined again per read"
    Session.objects.filter(pk=session.pk).update(proxy_state={**overhead, "system_tokens": 50})
    session.refresh_from_db()
    assert entry_queries(lambda: context_body(session)) == 0
    assert json.loads(context_body(session))["tokens"] == session.context_tokens + 350
    assert context_body(session) == uncached(session)
