"""The first context read after each kind of change returns exactly what a full build returns.

Each change is made after the context was read (so a cached copy exists in memory and in
the store), then read as three readers find it: the process that made the change (its
memory copy), a fresh process (only the stored response) and another process still holding
the copy from before the change. Each is compared, byte for byte, with a build from the
entries alone and, decoded, with `context_payload`. A change that replaces entries
(compaction, revert, offload) refreshes the stored response once committed; the tests run
with that refresh (`refreshed`) and without it (the commit hooks never run: the reader must
not trust what it holds).
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
from sessions_app.services.context import store as context_store
from sessions_app.services.context import text as context_text_module
from sessions_app.services.context.runtime import Format, context_body, context_payload
from sessions_app.services.context.text import clear_cache
from sessions_app.services.importing import import_file
from sessions_app.services.proxying.turns import record_answer
from sessions_app.services.sessions.lifecycle import append_messages
from tests.sessions_app.transcripts import (
    boundary,
    cc_assistant,
    cc_user,
    compact_summary,
    jsonl,
    text,
    tool_use,
)
from tests.support.histories import assistant, exchange, system, tool_call, user

pytestmark = pytest.mark.django_db

BIG = "line of tool output\n" * 50
READERS = ["writer", "fresh", "stale"]


def _compact(session: Session) -> None:
    compact_session(session, summarizer=ScriptedSummarizer(default="THE SUMMARY"))


def _edited(session: Session) -> None:
    compact_session(session, summary="A summary written by hand.")


def _revert(session: Session) -> None:
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default="GONE SOON"))
    assert outcome.compaction is not None
    session.refresh_from_db()
    clear_cache(stored=False)
    context_body(session)  # the compacted state is the one cached before the revert
    revert_compaction(session, outcome.compaction.number)


def _offload(session: Session) -> None:
    assert offload_session(session).offloaded_count >= 1


def _append(session: Session) -> None:
    append_messages(session, [user("one more question"), assistant("an answer")])


def _append_breaking_alternation(session: Session) -> None:
    append_messages(session, [assistant("a second answer in a row")])


def _append_tool_call(session: Session) -> None:
    append_messages(session, [user("read it"), tool_call("t9")])


def _append_system_message(session: Session) -> None:
    append_messages(session, [system("a note from the harness"), user("and then")])


def _proxy_answer(session: Session) -> None:
    digests = [f"d{i}" for i in range(session.message_count)]
    state = {"digests": digests, "system_tokens": 40, "tools_tokens": 300}
    Session.objects.filter(pk=session.pk).update(proxy_state=state)
    answer = assistant("from upstream")
    assert record_answer(session.pk, len(digests), answer, "answer", compact=False)


CHANGES: dict[str, Callable[[Session], None]] = {
    "append": _append,
    "append after the same role": _append_breaking_alternation,
    "append a tool call": _append_tool_call,
    "append a system message": _append_system_message,
    "compaction": _compact,
    "edited summary": _edited,
    "revert": _revert,
    "offload": _offload,
    "proxy answer": _proxy_answer,
}


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    history = [*conversation(6), user("go"), *exchange("t1", result=BIG), assistant("ok")]
    made: Session = make_session(messages=history, context_limit=3000, profile=profile)
    return made


def full_build(session: Session, fmt: Format) -> bytes:
    """The body built from the entries alone: no copy in memory, nothing stored."""
    clear_cache()
    return context_body(session, fmt)


def read_as(reader: str, session: Session, fmt: Format, before: Any) -> bytes:
    """The first read after a change by `reader` (see the module's docstring)."""
    if reader == "fresh":
        clear_cache(stored=False)
    elif reader == "stale":
        context_text_module._cache.put((session.pk, fmt), before)
    session.refresh_from_db()
    return context_body(session, fmt)


def change_and_read(
    session: Session, fmt: Format, change: str, reader: str, hooks: Any, refreshed: bool
) -> bytes:
    context_body(session, fmt)
    before = context_text_module._cache.get((session.pk, fmt))
    with hooks(execute=refreshed):
        CHANGES[change](session)
    return read_as(reader, session, fmt, before)


@pytest.mark.parametrize("refreshed", [True, False], ids=["refreshed", "not-refreshed"])
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_the_first_read_after_a_change_is_a_full_build(
    session: Session,
    fmt: Format,
    change: str,
    reader: str,
    refreshed: bool,
    django_capture_on_commit_callbacks: Any,
) -> None:
    before = context_body(session, fmt)
    body = change_and_read(
        session, fmt, change, reader, django_capture_on_commit_callbacks, refreshed
    )
    assert (body == before) == (change == "revert"), "a revert brings the first state back"
    assert json.loads(body) == context_payload(session, fmt).to_dict()
    assert body == full_build(session, fmt)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("change", ["compaction", "revert", "offload", "edited summary"])
def test_after_a_refresh_no_reader_reads_the_entries(
    session: Session, change: str, reader: str, django_capture_on_commit_callbacks: Any
) -> None:
    context_body(session)
    before = context_text_module._cache.get((session.pk, "anthropic"))
    with django_capture_on_commit_callbacks(execute=True):
        CHANGES[change](session)
    with CaptureQueriesContext(connection) as queries:
        body = read_as(reader, session, "anthropic", before)
    assert not [q for q in queries if "sessions_app_contextentry" in q["sql"]]
    assert body == full_build(session, "anthropic")


def test_a_refresh_builds_only_the_formats_someone_read(
    session: Session, django_capture_on_commit_callbacks: Any
) -> None:
    context_body(session, "anthropic")
    with django_capture_on_commit_callbacks(execute=True):
        _compact(session)
    assert context_text_module._cache.get((session.pk, "openai")) is None
    assert not list(context_store.store_dir().glob(f"{session.pk}.openai*"))


def test_a_session_never_read_costs_its_writer_nothing(
    session: Session, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _compact(session)
    assert context_text_module._cache.get((session.pk, "anthropic")) is None


def _transcript(grown: bool) -> bytes:
    records: list[Any] = [
        cc_user("u1", None, "one"),
        cc_assistant("a1", "u1", [text("first answer")], "m1"),
        cc_user("u2", "a1", "two"),
        cc_assistant("a2", "u2", [text("second answer")], "m2"),
    ]
    if grown:  # m2 gains a block (updated in place); a compaction and new messages follow
        records += [
            cc_assistant("a2b", "a2", [tool_use("t9")], "m2"),
            cc_user("u3", "a2b", "three"),
            cc_assistant("a3", "u3", [text("third answer")], "m3"),
        ]
    return jsonl(*records).encode()


def _compacted_transcript() -> bytes:
    return (
        _transcript(True)
        + jsonl(
            boundary("b1", "a3"),
            compact_summary("s1", "b1", "what happened so far"),
            cc_user("u4", "s1", "four"),
        ).encode()
    )


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
@pytest.mark.parametrize("later", ["grown", "compacted"])
def test_a_merged_import_is_read_as_a_full_build(
    user_account: Any, fmt: Format, reader: str, later: str
) -> None:
    session = import_file(user_account, _transcript(False), name="live.jsonl").session
    context_body(session, fmt)
    before = context_text_module._cache.get((session.pk, fmt))
    data = _transcript(True) if later == "grown" else _compacted_transcript()
    merged = import_file(user_account, data, name="live.jsonl").session
    assert merged.pk == session.pk
    body = read_as(reader, session, fmt, before)
    assert json.loads(body) == context_payload(session, fmt).to_dict()
    assert body == full_build(session, fmt)
    if later == "grown":
        assert b"t9" in body, "the message updated in place is read again"


@pytest.fixture
def user_account(user: Any) -> Any:
    return user


def test_a_failed_refresh_fails_no_write_and_the_reader_builds(
    session: Session, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    context_body(session)
    built = context_text_module._built

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the refresh")

    monkeypatch.setattr(context_text_module, "_built", broken)
    with django_capture_on_commit_callbacks(execute=True):
        _compact(session)  # raises nothing
    monkeypatch.setattr(context_text_module, "_built", built)
    body = read_as("fresh", session, "anthropic", None)
    assert b"THE SUMMARY" in body
    assert body == full_build(session, "anthropic")


def test_a_writer_with_nothing_in_memory_refreshes_the_stored_format(
    session: Session, django_capture_on_commit_callbacks: Any
) -> None:
    context_body(session, "openai")  # read in another process: only the file is shared
    clear_cache(stored=False)
    with django_capture_on_commit_callbacks(execute=True):
        _compact(session)
    clear_cache(stored=False)
    with CaptureQueriesContext(connection) as queries:
        body = read_as("fresh", session, "openai", None)
    assert not [q for q in queries if "sessions_app_contextentry" in q["sql"]]
    assert body == full_build(session, "openai")
