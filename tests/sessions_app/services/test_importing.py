"""Storing imports: rows, totals, imported compaction points (nested, revertible), raw source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage

from compaction import SUMMARY_KEY, validate_messages
from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.errors import InvalidInput
from sessions_app.services.importing import import_file
from sessions_app.services.sessions.state import recounted
from tests.sessions_app import samples
from tests.sessions_app.samples import EXPECTED, WORKTREES
from tests.sessions_app.transcripts import (
    boundary,
    cc_assistant,
    cc_user,
    compact_summary,
    jsonl,
    preserved_session_lines,
    text,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def samples_dir() -> Path:
    return samples.samples_dir()


def _check_consistent(session: Session) -> None:
    messages = Message.objects.filter(session=session)
    assert session.message_count == messages.count()
    assert session.history_tokens == sum(m.token_count for m in messages)
    assert session.next_seq == session.message_count
    entries = list(ContextEntry.objects.filter(session=session).order_by("position"))
    assert session.next_position > max((e.position for e in entries), default=-1)
    recount = recounted(session)  # the counters' own recomputation agrees
    assert {name: getattr(session, name) for name in recount} == recount
    assert validate_messages(runtime_messages(session)) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_sample_is_stored(user: Any, samples_dir: Path, name: str) -> None:
    report = import_file(user, samples_dir / name)
    expected = EXPECTED[name]
    assert report.source_format == expected["format"]
    assert report.counts == expected["counts"]
    assert len(report.sessions) == 1 + len(expected["subagents"])
    main = report.session
    assert main.owner == user
    assert main.message_count == expected["counts"]["messages"]
    assert main.compaction_count == expected["counts"]["compactions"]
    assert main.raw_source.name
    with default_storage.open(main.raw_source.name, "rb") as stored:
        assert stored.read() == (samples_dir / name).read_bytes()
    for session in report.sessions:
        _check_consistent(session)
    children = [s for s in report.sessions if s.parent_id == main.pk]
    assert [Message.objects.filter(session=c).count() for c in children] == [
        c["messages"] for c in expected["subagents"]
    ]


def test_worktrees_subagents_keep_their_links_and_files(user: Any, samples_dir: Path) -> None:
    report = import_file(user, samples_dir / WORKTREES)
    main, *agents = report.sessions
    assert len(agents) == 6
    for agent in agents:
        assert agent.parent_id == main.pk
        assert agent.parent_tool_use_id.startswith("toolu_")
        assert str(agent.raw_source.name).endswith(f"agent-{agent.external_id}.jsonl")
        assert agent.metadata["agent"]["description"] == agent.title
    assert "Imported" not in report.summary_line()
    assert report.summary_line().startswith(
        "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl: claude_code, 37 messages, 40 tool calls"
    )


def test_imported_compactions_nest_and_revert(user: Any) -> None:
    data = jsonl(
        cc_user("u1", None, "one"),
        cc_assistant("a1", "u1", [text("1")], "m1"),
        boundary("b1", "a1", postTokens=50),
        compact_summary("s1", "b1", "first summary"),
        cc_user("u2", "s1", "two"),
        cc_assistant("a2", "u2", [text("2")], "m2"),
        boundary("b2", "a2"),
        compact_summary("s2", "b2", "second summary"),
        cc_user("u3", "s2", "three"),
    ).encode()
    report = import_file(user, data, name="two-compactions.jsonl")
    session = report.session
    first, second = Compaction.objects.filter(session=session).order_by("number")
    assert (first.trigger, first.first_seq, first.last_seq) == ("imported", 0, 1)
    assert (second.first_seq, second.last_seq) == (0, 3)
    assert first.parent_id == second.pk
    assert second.parent_id is None
    assert first.details["pre_tokens"] == 1000
    assert first.details["post_tokens"] == 50
    assert first.details["source_trigger"] == "manual"
    # Message seq n sits at position 2n+1; a summary takes the first position it freed.
    assert (first.first_position, first.last_position) == (1, 3)
    assert (second.first_position, second.last_position) == (1, 7)
    context = runtime_messages(session)
    assert context[0]["content"] == "second summary"
    assert context[0][SUMMARY_KEY]["compaction"] == 2
    assert [m["content"] for m in context[1:]] == ["three"]
    # Revert the newest: the first summary and the messages after it come back.
    revert_compaction(session, 2)
    restored = runtime_messages(session)
    assert [m["content"] for m in restored] == [
        "first summary",
        "two",
        [text("2")],
        "three",
    ]
    _check_consistent(session)
    revert_compaction(session, 1)
    assert [m["content"] for m in runtime_messages(session)][:2] == ["one", [text("1")]]
    _check_consistent(session)


def test_a_ctxweb_compaction_absorbs_an_imported_one(user: Any) -> None:
    records: list[Any] = [
        cc_user("u0", None, "start"),
        cc_assistant("a0", "u0", [text("ok")], "m0"),
        boundary("b1", "a0"),
        compact_summary("s1", "b1", "the start"),
    ]
    parent = "s1"
    for i in range(1, 20):
        records.append(cc_user(f"u{i}", parent, f"prompt {i}"))
        records.append(cc_assistant(f"a{i}", f"u{i}", [text(f"reply {i}")], f"m{i}"))
        parent = f"a{i}"
    session = import_file(user, jsonl(*records).encode(), name="long.jsonl").session
    session.context_limit = 200  # a small window: the tail keeps only the newest messages
    session.save(update_fields=["context_limit"])
    outcome = compact_session(session, summary="All of it, summarized by hand.")
    assert outcome.compacted
    imported = Compaction.objects.get(session=session, number=1)
    assert outcome.compaction is not None
    assert imported.parent_id == outcome.compaction.pk
    assert outcome.compaction.first_seq == 0  # its range covers the imported one's


def test_corrupt_input_reports_lines_and_stores_the_rest(user: Any) -> None:
    data = (jsonl(cc_user("u1", None, "hi")) + "{oops\n").encode()
    report = import_file(user, data, name="broken.jsonl", title="Mine")
    assert report.skipped_count == 1
    assert report.skipped[0].line == 2
    assert report.session.title == "Mine"
    assert report.session.metadata["import"]["skipped"] == [
        {"line": 2, "reason": report.skipped[0].reason}
    ]
    assert report.as_dict()["skipped_count"] == 1


def test_unreadable_input_stores_nothing(user: Any) -> None:
    with pytest.raises(InvalidInput):
        import_file(user, b'{"not": "a transcript"}', name="x.json")
    with pytest.raises(InvalidInput, match=r"no messages found in empty\.jsonl"):
        import_file(user, jsonl({"type": "summary", "summary": "t"}).encode(), name="empty.jsonl")
    assert Session.objects.count() == 0


def test_large_import_spills_and_stores_in_batches(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sessions_app.importers.messagelog.MEMORY_MESSAGES", 10)
    monkeypatch.setattr("sessions_app.services.importing.store.BATCH", 7)
    records = [cc_user("u0", None, "start")]
    for i in range(1, 40):
        records.append(cc_assistant(f"a{i}", f"u{i - 1}", [text(f"reply {i}")], f"m{i}"))
        records.append(cc_user(f"u{i}", f"a{i}", f"prompt {i}"))
    stages: list[str] = []
    report = import_file(
        user, jsonl(*records).encode(), name="long.jsonl", progress=lambda s, d, t: stages.append(s)
    )
    assert report.session.message_count == 79
    assert "store" in stages
    assert "pass 2" in stages
    assert list(
        Message.objects.filter(session=report.session).order_by("seq").values_list("seq", flat=True)
    ) == list(range(79))
    _check_consistent(report.session)


def test_preserved_segment_positions_and_revert(user: Any) -> None:
    session = import_file(user, preserved_session_lines().encode(), name="kept.jsonl").session
    compaction = Compaction.objects.get(session=session)
    assert (compaction.first_seq, compaction.last_seq) == (0, 1)
    assert (compaction.first_position, compaction.last_position) == (1, 3)
    entries = ContextEntry.objects.filter(session=session).order_by("position")
    assert [(e.kind, e.position) for e in entries] == [
        ("summary", 1),
        ("message", 5),
        ("message", 7),
        ("message", 9),
    ]
    revert_compaction(session, 1)
    assert [m["content"] for m in runtime_messages(session)] == [
        "one",
        [text("1")],
        "two",
        [text("2")],
        "three",
    ]
    _check_consistent(session)
