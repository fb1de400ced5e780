"""Full-text search over full histories (selectors/search.py, issue 28): archived originals
included, newest first, owner-scoped, kept current by the database's index on every write.

Runs on SQLite (FTS5) and, with DATABASE_URL set, on PostgreSQL (GIN full-text index)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sessions_app.models import Message, Session
from sessions_app.selectors.search import search_history, snippet_of
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import InvalidInput
from sessions_app.services.sessions.lifecycle import append_messages, delete_session

pytestmark = pytest.mark.django_db

FACT = "The deploy password rotation happens on quokka day"


def _said(text: str, at: str | None = None) -> list[dict[str, Any]]:
    """A user message saying `text` and a reply, at `at` (None: now)."""
    time = {"created_at": at} if at else {}
    return [
        {"role": "user", "content": text, **time},
        {"role": "assistant", "content": [{"type": "text", "text": "noted"}], **time},
    ]


def _compacted(make_session: Callable[..., Session], conversation: Any) -> Session:
    """A session whose first user message (holding FACT) only its compaction's originals keep."""
    history = conversation(8)
    history[1] = {"role": "user", "content": f"{FACT}. Please remember it."}
    session = make_session(messages=history)
    outcome = compact_session(session, summary="The user set up a deploy.", force=True)
    assert outcome.compaction is not None
    assert outcome.compaction.number == 1
    return session


def test_finds_a_fact_only_the_archived_originals_hold(
    make_session: Callable[..., Session], conversation: Any, user: Any
) -> None:
    session = _compacted(make_session, conversation)
    append_messages(session, _said("what about the quokka day?"))
    hits = search_history(user, "quokka")
    assert [(h.message_index, h.compaction) for h in hits] == [
        (len(conversation(8)), None),  # the newest, in the live context
        (1, 1),  # covered by compaction #1
    ]
    archived = hits[1]
    assert archived.session_id == str(session.pk)
    assert archived.role == "user"
    start, end = archived.highlights[0]
    assert archived.snippet[start:end].lower() == "quokka"
    assert "deploy password rotation" in archived.snippet


def test_every_word_whole_any_case_in_tool_calls_and_results(
    make_session: Callable[..., Session], user: Any
) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "src/Main.py"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def frobnicate(): pass"}
    make_session(
        messages=[
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    )
    assert [h.message_index for h in search_history(user, "FROBNICATE")] == [2]
    assert [h.message_index for h in search_history(user, "main.py")] == [1]
    assert search_history(user, "frobnicate absent") == []  # every word
    assert search_history(user, "frobnic") == []  # whole words


def test_only_the_owners_sessions_and_one_session_when_asked(
    make_session: Callable[..., Session], user: Any, other_user: Any
) -> None:
    mine = make_session(messages=_said("the walrus plan", "2026-01-01T00:00:00Z"))
    second = make_session(messages=_said("another walrus", "2026-01-02T00:00:00Z"))
    make_session(owner=other_user, messages=_said("their walrus secret", "2026-01-03T00:00:00Z"))
    assert {h.session_id for h in search_history(user, "walrus")} == {
        str(mine.pk),
        str(second.pk),
    }
    assert [h.session_id for h in search_history(user, "walrus", session=mine)] == [str(mine.pk)]
    assert search_history(user, "secret") == []
    assert search_history(None, "walrus") == []


def test_newest_first_in_pages(make_session: Callable[..., Session], user: Any) -> None:
    session = make_session(messages=_said("heron one", "2026-01-01T00:00:00Z"))
    for day in (3, 2):  # appended out of time order: time decides, not insertion
        append_messages(session, _said(f"heron {day}", f"2026-01-0{day}T00:00:00Z"))
    everything = [h.snippet for h in search_history(user, "heron")]
    assert everything == ["heron 3", "heron 2", "heron one"]
    assert [h.snippet for h in search_history(user, "heron", limit=2)] == everything[:2]
    assert [h.snippet for h in search_history(user, "heron", limit=2, offset=2)] == everything[2:]


def test_the_index_follows_rewrites_and_deletes(
    make_session: Callable[..., Session], user: Any
) -> None:
    session = make_session(messages=_said("a narwhal here", "2026-01-01T00:00:00Z"))
    Message.objects.filter(session=session, seq=0).update(content="a dugong now")
    assert search_history(user, "narwhal") == []
    assert [h.message_index for h in search_history(user, "dugong")] == [0]
    delete_session(session)
    assert search_history(user, "dugong") == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": " ... !! "}, "query"),
        ({"query": "x" * 1001}, "query"),
        ({"query": "ok", "limit": 0}, "limit"),
        ({"query": "ok", "limit": 101}, "limit"),
        ({"query": "ok", "offset": -1}, "offset"),
    ],
)
def test_bad_input_names_the_field(user: Any, arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        search_history(user, **arguments)
    assert [p.path for p in raised.value.problems] == [field]


def test_odd_queries_are_searched_not_failed(
    make_session: Callable[..., Session], user: Any
) -> None:
    make_session(messages=_said('say "hi" OR NOT (x*) NEAR', "2026-01-01T00:00:00Z"))
    assert [h.message_index for h in search_history(user, '"hi" OR NOT (x*)\x00 NEAR')] == [0]


def test_snippet_is_cut_around_the_first_match() -> None:
    text = "word " * 200 + "needle and more " + "tail " * 200
    snippet, highlights = snippet_of(text, ["needle"])
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert len(snippet) <= 242
    [(start, end)] = highlights
    assert snippet[start:end] == "needle"


def test_a_huge_message_is_stored_and_found(
    make_session: Callable[..., Session], user: Any
) -> None:
    """Over tsvector's 1 MB of distinct words: still stored (a write never fails on the
    index), found by its first words."""
    words = " ".join(f"w{n}z" for n in range(220_000))
    session = make_session(messages=[{"role": "user", "content": f"needle {words}"}])
    assert Message.objects.filter(session=session).count() == 1
    [hit] = search_history(user, "needle")
    assert hit.snippet.startswith("needle w0z")


def test_a_word_many_messages_hold_gives_the_same_pages(
    make_session: Callable[..., Session], user: Any, other_user: Any, monkeypatch: Any
) -> None:
    """SQLite answers a word of many messages from the time index (search._FEW): the same
    hits, order, pages and owner scoping as when every match is listed."""
    from sessions_app.selectors import search

    session = make_session(messages=_said("ibis one", "2026-01-01T00:00:00Z"))
    for day in (5, 2, 4, 3):
        append_messages(session, _said(f"ibis {day}", f"2026-01-0{day}T00:00:00Z"))
    make_session(owner=other_user, messages=_said("ibis theirs", "2026-01-09T00:00:00Z"))
    pages = [(2, 0), (2, 2), (20, 0), (1, 4)]
    listed = [
        [h.snippet for h in search_history(user, "ibis", limit=n, offset=o)] for n, o in pages
    ]
    monkeypatch.setattr(search, "_FEW", 1)
    walked = [
        [h.snippet for h in search_history(user, "ibis", limit=n, offset=o)] for n, o in pages
    ]
    assert walked == listed
    assert listed[2] == ["ibis 5", "ibis 4", "ibis 3", "ibis 2", "ibis one"]
    assert [h.snippet for h in search_history(user, "ibis", session=session, limit=2)] == listed[0]


def test_one_session_a_word_most_messages_hold_gives_the_newest_hits(
    make_session: Callable[..., Session], user: Any, monkeypatch: Any
) -> None:
    """SQLite reads one session's messages newest first in batches for a word of many
    messages (search._FEW, search._BATCH): the newest `limit` hits, in order, pages too."""
    from sessions_app.selectors import search

    session = make_session(messages=_said("kiwi 0", "2026-01-01T00:00:00Z"))
    for day in range(1, 10):
        text = f"other {day}" if day % 3 == 0 else f"kiwi {day}"
        append_messages(session, _said(text, f"2026-01-{day + 1:02d}T00:00:00Z"))
    make_session(messages=_said("kiwi elsewhere", "2026-02-01T00:00:00Z"))
    listed = [
        [h.snippet for h in search_history(user, "kiwi", session=session, limit=n, offset=o)]
        for n, o in [(3, 0), (3, 2), (20, 0)]
    ]
    monkeypatch.setattr(search, "_FEW", 1)
    monkeypatch.setattr(search, "_BATCH", 2)
    walked = [
        [h.snippet for h in search_history(user, "kiwi", session=session, limit=n, offset=o)]
        for n, o in [(3, 0), (3, 2), (20, 0)]
    ]
    assert walked == listed
    assert listed[0] == ["kiwi 8", "kiwi 7", "kiwi 5"]
    assert listed[1] == ["kiwi 5", "kiwi 4", "kiwi 2"]
    assert listed[2] == [
        "kiwi 8",
        "kiwi 7",
        "kiwi 5",
        "kiwi 4",
        "kiwi 2",
        "kiwi 1",
        "kiwi 0",
    ]
