"""sessions_app.services.compacting.session_compaction: commit, archive, parents, dry run,
failures, revert."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.storage import FileSystemStorage, default_storage
from django.db import DatabaseError

from compaction import ScriptedSummarizer, SummaryError, validate_messages
from compaction.carried_state import STATE_CLOSE, STATE_OPEN
from compaction.messages import SUMMARY_PREFIX, is_summary_message, message_text
from compaction.state_block import parse_state_block
from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.errors import Conflict, NotFound

pytestmark = pytest.mark.django_db

SUMMARY = "Goals and key decisions:\n- fix the parser"


def seq_range(compaction: Compaction) -> tuple[int, int]:
    """The (first_seq, last_seq) of a compaction that has a range."""
    assert compaction.first_seq is not None
    assert compaction.last_seq is not None
    return compaction.first_seq, compaction.last_seq


def narrative_and_block(summary: str) -> tuple[str, str]:
    """A summary split into the summarizer's text and the `<session-state>` block the engine
    ends it with (docs/behaviour.md#what-a-summary-always-keeps)."""
    narrative, separator, rest = summary.partition(f"\n\n{STATE_OPEN}\n")
    assert separator, f"no state block in {summary!r}"
    block = f"{STATE_OPEN}\n{rest}"
    assert block.endswith(f"\n{STATE_CLOSE}"), block
    assert block.count(STATE_OPEN) == block.count(STATE_CLOSE) == 1, block
    return narrative, block


def first_request(session: Session) -> str:
    """The text of the session's first user message."""
    first = Message.objects.filter(session=session, role="user").order_by("seq").first()
    assert first is not None
    return message_text(first.as_dict())


def state(session: Session) -> dict[str, Any]:
    """Everything a compaction may change, to compare before and after."""
    fresh = Session.objects.get(pk=session.pk)
    entries = list(
        ContextEntry.objects.filter(session=session)
        .order_by("position")
        .values_list(
            "id",
            "position",
            "kind",
            "message_id",
            "compaction_id",
            "role",
            "content",
            "extra",
            "token_count",
        )
    )
    totals = {
        name: getattr(fresh, name)
        for name in (
            "version",
            "context_revision",
            "context_tokens",
            "context_entry_count",
            "compaction_count",
            "message_count",
            "history_tokens",
        )
    }
    history = list(Message.objects.filter(session=session).values_list("seq", "content"))
    succeeded = Compaction.objects.filter(session=session, status="succeeded").count()
    return {"entries": entries, "totals": totals, "history": history, "succeeded": succeeded}


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def test_compaction_replaces_the_middle_by_one_summary_entry(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(last_usage={"input_tokens": 2000})
    before = state(session)
    summarizer = ScriptedSummarizer(default=SUMMARY)
    outcome = compact_session(session, summarizer=summarizer)
    compaction = outcome.compaction
    assert outcome.compacted
    assert compaction is not None
    assert compaction.number == 1
    assert compaction.status == "succeeded"
    assert compaction.trigger == "manual"
    assert compaction.summarizer == "scripted"
    # The summarizer's text, then the session state the engine appends: the block the
    # summarizer was shown, verbatim (docs/behaviour.md#what-a-summary-always-keeps).
    narrative, block = narrative_and_block(compaction.summary)
    assert narrative == SUMMARY
    assert block == summarizer.requests[0].state_block
    carried = parse_state_block(block)
    assert carried is not None
    assert carried.first_request == first_request(session)
    assert carried.files  # the middle's tool calls touched files
    messages = runtime_messages(session)
    summaries = [m for m in messages if is_summary_message(m)]
    assert len(summaries) == 1
    # The stored summary message holds the whole summary, its block included; the engine
    # merges the tail's first user message into it (issue 10).
    assert compaction.summary in message_text(summaries[0])
    assert messages[0]["role"] == "system"
    assert validate_messages(messages) == []
    # The full history is never edited.
    after = state(session)
    assert after["history"] == before["history"]
    # Range, stats and cached totals.
    assert compaction.first_seq == 1
    assert compaction.tokens_before == before["totals"]["context_tokens"]
    assert compaction.tokens_after == session.context_tokens
    first, last = seq_range(compaction)
    assert compaction.compacted_message_count == last - first + 1
    assert session.context_entry_count == len(messages)
    assert session.compaction_count == 1
    assert session.version == before["totals"]["version"] + 1
    # Usage statistics are cleared until the next model call
    # (docs/behaviour.md#runtime-context-and-history).
    assert session.last_usage is None


def test_the_ratio_is_tokens_after_over_tokens_before(session: Session) -> None:
    compaction = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    assert compaction is not None
    assert compaction.ratio == pytest.approx(compaction.tokens_after / compaction.tokens_before)


def test_the_archive_holds_the_exact_replaced_entries(session: Session) -> None:
    before = {row[0]: row for row in state(session)["entries"]}
    compaction = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    assert compaction is not None
    assert compaction.archive
    name = compaction.archive.name or ""
    with default_storage.open(name) as handle:
        document = json.load(handle)
    archived = document["entries"]
    first, last = seq_range(compaction)
    assert [a["seq"] for a in archived] == list(range(first, last + 1))
    for item in archived:
        original = before[item["id"]]
        assert (item["position"], item["kind"], item["message_id"], item["token_count"]) == (
            original[1],
            original[2],
            original[3],
            original[8],
        )
        row = Message.objects.get(pk=item["message_id"])
        assert item["message"] == row.as_dict()
    assert name.startswith(f"archives/{session.pk}/compact-")


def test_a_second_compaction_absorbs_the_first_and_becomes_its_parent(session: Session) -> None:
    first = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    from sessions_app.services.sessions.lifecycle import append_messages
    from tests.support.histories import assistant, user

    append_messages(
        session,
        [m for i in range(8) for m in (user(f"more {i} " * 40), assistant(f"ok {i} " * 40))],
    )
    summarizer = ScriptedSummarizer(default="second summary")
    second = compact_session(session, summarizer=summarizer).compaction
    assert first is not None
    assert second is not None
    first.refresh_from_db()
    assert first.parent_id == second.pk
    assert seq_range(second)[0] == seq_range(first)[0]
    assert seq_range(second)[1] > seq_range(first)[1]
    narrative, block = narrative_and_block(second.summary)
    assert narrative == "second summary"
    assert block == summarizer.requests[0].state_block
    summary_text = next(m for m in runtime_messages(session) if is_summary_message(m))["content"]
    # The summary (its block included) comes first; outlines of files viewed in the span
    # may follow it.
    assert summary_text.split("\n\n<system-reminder>")[0] == f"{SUMMARY_PREFIX}\n{second.summary}"
    # A summary of summaries loses nothing of the state the first one carried.
    earlier = parse_state_block(narrative_and_block(first.summary)[1])
    later = parse_state_block(block)
    assert earlier is not None
    assert later is not None
    assert later.first_request == earlier.first_request == first_request(session)
    assert earlier.files
    assert {t.path for t in earlier.files} <= {t.path for t in later.files}


def test_a_caller_written_summary_needs_no_summarizer(session: Session) -> None:
    never = ScriptedSummarizer()  # raises if it is ever asked
    outcome = compact_session(session, summary="My own summary.", summarizer=never)
    assert outcome.compaction is not None
    assert outcome.compaction.summarizer == "caller"
    assert outcome.compaction.summary == "My own summary."
    assert never.requests == []


def test_dry_run_returns_the_preview_and_stores_nothing(session: Session) -> None:
    before = state(session)
    summarizer = ScriptedSummarizer(default=SUMMARY)
    outcome = compact_session(session, dry_run=True, summarizer=summarizer)
    assert outcome.dry_run
    assert outcome.compaction is None
    assert outcome.compacted
    preview = outcome.preview
    assert preview is not None
    parts = preview.partition
    assert parts is not None
    assert parts["head"]["messages"] == 1
    total = sum(parts[p]["messages"] for p in ("head", "middle", "tail"))
    assert total == before["totals"]["context_entry_count"]
    # The preview's summary is what a compaction would store: the text and its state block.
    assert preview.summary is not None
    narrative, block = narrative_and_block(preview.summary)
    assert narrative == SUMMARY
    assert block == summarizer.requests[0].state_block
    assert preview.tokens_before == before["totals"]["context_tokens"]
    assert preview.predicted_tokens_after < preview.tokens_before
    assert state(session) == before
    assert not Compaction.objects.exists()


def test_a_summarizer_failure_is_recorded_and_changes_nothing(session: Session) -> None:
    before = state(session)
    failing = ScriptedSummarizer(default=SummaryError("api_error", "529 overloaded"))
    outcome = compact_session(session, summarizer=failing)
    assert outcome.failed
    assert not outcome.compacted
    assert outcome.compaction is not None
    assert outcome.compaction.failure_reason == "api_error"
    assert any(e["phase"] == "rollback" for e in outcome.compaction.details["events"])
    assert state(session) == before


def test_an_archive_write_failure_changes_nothing(session: Session, monkeypatch: Any) -> None:
    before = state(session)

    def broken_save(*args: Any, **kwargs: Any) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(FileSystemStorage, "save", broken_save)
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY))
    assert outcome.failed
    assert outcome.compaction is not None
    assert outcome.compaction.failure_reason == "archive_error"
    assert state(session) == before


def test_a_database_failure_changes_nothing_and_leaves_no_archive(
    session: Session, monkeypatch: Any
) -> None:
    before = state(session)

    def broken_bulk_create(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseError("connection lost at commit")

    monkeypatch.setattr(ContextEntry.objects, "bulk_create", broken_bulk_create)
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY))
    assert outcome.failed
    assert outcome.compaction is not None
    assert outcome.compaction.failure_reason == "database_error"
    assert state(session) == before
    folder = f"archives/{session.pk}"
    assert not default_storage.exists(folder) or default_storage.listdir(folder)[1] == []


def test_nothing_to_compact_stores_nothing(make_session: Any) -> None:
    session = make_session(messages=[{"role": "user", "content": "hi"}])
    outcome = compact_session(session)
    assert outcome.compaction is None
    assert not outcome.compacted
    assert outcome.reason == "nothing_to_compact"
    assert not Compaction.objects.exists()


def test_a_pending_tool_call_stays_last_and_the_rest_is_compacted(
    session: Session,
) -> None:
    from sessions_app.services.sessions.lifecycle import append_messages
    from tests.support.histories import tool_call, user

    append_messages(session, [user("read the file"), tool_call("pending-1")])
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY))
    assert outcome.compacted
    messages = runtime_messages(session)
    assert messages[-1]["content"][0]["id"] == "pending-1"


def test_revert_restores_the_entries_exactly(session: Session) -> None:
    before = state(session)
    compaction = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    assert compaction is not None
    reverted = revert_compaction(session, compaction.number)
    assert reverted.status == "reverted"
    after = state(session)
    assert after["entries"] == before["entries"]
    for name in ("context_tokens", "context_entry_count", "compaction_count", "message_count"):
        assert after["totals"][name] == before["totals"][name]


def test_only_the_newest_compaction_over_a_region_can_be_reverted(session: Session) -> None:
    from sessions_app.services.sessions.lifecycle import append_messages
    from tests.support.histories import assistant, user

    first = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    append_messages(
        session,
        [m for i in range(8) for m in (user(f"more {i} " * 40), assistant(f"ok {i} " * 40))],
    )
    second = compact_session(session, summarizer=ScriptedSummarizer(default="second")).compaction
    assert first is not None
    assert second is not None
    with pytest.raises(Conflict) as info:
        revert_compaction(session, first.number)
    assert info.value.blocking == second.number
    assert f"#{second.number}" in str(info.value)
    revert_compaction(session, second.number)
    first.refresh_from_db()
    assert first.parent_id is None
    revert_compaction(session, first.number)
    assert not [m for m in runtime_messages(session) if is_summary_message(m)]


def test_reverting_a_reverted_or_failed_compaction_conflicts(session: Session) -> None:
    compaction = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    assert compaction is not None
    revert_compaction(session, compaction.number)
    with pytest.raises(Conflict):
        revert_compaction(session, compaction.number)
    with pytest.raises(NotFound):
        revert_compaction(session, 99)


def test_the_engine_sums_the_cached_counts_it_is_given(session: Session) -> None:
    # Doctored cached counts show through: the stored context is not re-encoded.
    ContextEntry.objects.filter(session=session).update(token_count=1000)
    entries = ContextEntry.objects.filter(session=session).count()
    outcome = compact_session(session, dry_run=True, summarizer=ScriptedSummarizer(default=SUMMARY))
    assert outcome.result is not None
    assert outcome.result.events[0].phase == "compaction_start"
    assert outcome.result.events[0].tokens_before == 1000 * entries


def test_a_dry_run_predicts_the_tokens_applying_stores_recall_line_included(
    session: Session,
) -> None:
    preview = compact_session(
        session, summarizer=ScriptedSummarizer(default=SUMMARY), dry_run=True
    ).preview
    compaction = compact_session(session, summarizer=ScriptedSummarizer(default=SUMMARY)).compaction
    assert preview is not None
    assert compaction is not None
    summary = ContextEntry.objects.get(compaction=compaction, kind=ContextEntry.Kind.SUMMARY)
    assert "read_messages" in str(summary.content)  # the recall line is on
    assert compaction.tokens_after == preview.predicted_tokens_after
