"""compact_messages: the flow of docs/behaviour.md#compaction-flow, with a scripted
summarizer and a fake clock."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest

from compaction import (
    CompactionEvent,
    CompactStats,
    InvalidMessagesError,
    Policy,
    ScriptedSummarizer,
    SummaryError,
    compact_messages,
    count_tokens,
    validate_messages,
)
from compaction.alternation import alternates
from compaction.blobstore import LocalBlobStore
from compaction.carried_state import without_state_block
from compaction.errors import BlobStoreError
from compaction.messages import SUMMARY_KEY, SUMMARY_PREFIX, is_summary_message
from tests.support.histories import assistant, system, user, words
from tests.support.histories import coding_history as history

SUMMARY = "Goals and key decisions:\n- fix the parser"


# Tail: the last 2 messages (budget 100 tokens is reached by the first scanned message,
# keep_recent_messages raises it to 2). min_recall 0: no retention re-ask unless a test asks.
POLICY = Policy(
    context_limit=1000,
    trigger_ratio=0.5,
    tail_retention_ratio=0.1,
    keep_recent_messages=2,
    steps=("summary",),
    min_recall=0,
)


def compact(messages, policy=POLICY, summarizer=None, **kwargs):
    return compact_messages(
        messages, policy, summarizer=summarizer or ScriptedSummarizer(default=SUMMARY), **kwargs
    )


# --- when nothing is compacted ------------------------------------------------------------


def test_below_the_threshold_returns_the_input_untouched():
    messages = history()

    result = compact(messages, POLICY.replace(context_limit=1_000_000))

    assert not result.compacted
    assert result.reason == "below_threshold"
    assert result.messages is messages
    assert result.stats == CompactStats()
    assert result.events == ()


def test_not_compacted_stats_are_all_zero_or_none():
    stats = compact(history(), POLICY.replace(context_limit=1_000_000)).stats

    assert stats.to_dict() == {
        "original_token_count": 0,
        "compacted_token_count": 0,
        "compaction_ratio": None,
        "compacted_message_count": 0,
        "retained_message_count": 0,
        "recall": None,
    }


def test_empty_list_is_not_compacted():
    result = compact([], force=True)

    assert (result.compacted, result.reason, result.messages) == (False, "empty", [])


def test_disabled_policy_skips_unless_forced():
    messages = history()
    disabled = POLICY.replace(enabled=False)

    assert compact(messages, disabled).reason == "disabled"
    assert compact(messages, disabled, force=True).compacted


def test_force_compacts_below_the_threshold():
    result = compact(
        history(), POLICY.replace(context_limit=1_000_000, tail_retention_ratio=0.0001), force=True
    )

    assert result.compacted


def test_no_middle_means_nothing_to_compact():
    messages = [system("s"), user(words(400)), assistant(words(400))]
    summarizer = ScriptedSummarizer(default=SUMMARY)

    result = compact(messages, summarizer=summarizer)

    assert not result.compacted
    assert result.reason == "nothing_to_compact"
    assert result.messages is messages
    assert summarizer.requests == []  # never called without a middle (docs/behaviour.md#summary)


def test_invalid_input_raises_with_problems():
    with pytest.raises(InvalidMessagesError) as caught:
        compact([user("hi"), {"role": "robot", "content": "x"}])

    assert caught.value.problems[0].path == "messages[1].role"


# --- a successful compaction ----------------------------------------------------------------


def test_output_is_head_summary_tail():
    messages = history()

    result = compact(messages)

    assert result.compacted
    assert result.reason is None
    assert result.messages[0] is messages[0]
    summary = result.messages[1]
    assert summary["role"] == "user"
    # The summary text, the session state (docs/behaviour.md#what-a-summary-always-keeps), then
    # the outline of the file the middle viewed (docs/behaviour.md#file-outlines); the tail's
    # first message is a user message too: merged in, so the roles alternate.
    text, merged = summary["content"]
    assert text["text"].startswith(f"{SUMMARY_PREFIX}\n{SUMMARY}\n\n<session-state>")
    assert "</session-state>\n\n<system-reminder>" in text["text"]
    assert "Folded src/parser.py" in text["text"]
    assert merged == {"type": "text", "text": messages[-2]["content"]}
    assert is_summary_message(summary)
    assert result.messages[2] is messages[-1]
    assert alternates(result.messages)
    assert without_state_block(result.summary or "").rstrip() == SUMMARY
    assert validate_messages(result.messages) == []


def test_stats_follow_documented():
    messages = history()

    result = compact(messages)

    before = count_tokens(messages)
    after = count_tokens(result.messages)
    assert result.stats == CompactStats(
        original_token_count=before,
        compacted_token_count=after,
        compaction_ratio=after / before,
        # The middle, and the tail's user message merged into the summary (alternation).
        compacted_message_count=len(messages) - 2,
        retained_message_count=2,  # head (1) + the tail's assistant message
        recall=result.stats.recall,
    )
    assert result.partition is not None
    assert len(result.partition.middle) + 1 == result.stats.compacted_message_count
    assert len(result.messages) == 3


def test_summary_metadata_names_summarizer_count_and_level(clock):
    result = compact(history(), clock=clock)

    meta = dict(result.messages[1][SUMMARY_KEY])
    assert meta.pop("state")["files"]  # the session state (test_carried_state.py)
    assert meta == {
        "summarizer": "scripted",
        "message_count": 10,
        "covered_message_count": 10,
        "level": 1,
        "created_at": "2026-02-17T10:15:00+00:00",
    }
    assert result.summarizer == "scripted"


def test_the_input_is_never_mutated():
    messages = history()
    snapshot = copy.deepcopy(messages)
    ids = [id(m) for m in messages]

    compact(messages)
    compact(
        messages,
        summarizer=ScriptedSummarizer(SummaryError("timeout")),
        policy=POLICY.replace(max_retries=0),
    )

    assert messages == snapshot
    assert [id(m) for m in messages] == ids


def test_summarizer_gets_the_middle_cap_instructions_and_encoding():
    messages = history()
    summarizer = ScriptedSummarizer(SUMMARY)

    compact(
        messages,
        POLICY.replace(summary_max_tokens=321, encoding="cl100k_base"),
        summarizer,
        instructions="keep the test names",
    )

    [request] = summarizer.requests
    assert list(request.messages) == messages[1:-2]
    # The state block takes its share first; the narrative gets the rest of the 321 tokens.
    assert request.state_block.startswith("<session-state>")
    block = count_tokens([{"role": "user", "content": request.state_block}], encoding="cl100k_base")
    assert 0 < request.max_tokens <= 321 - block + 2
    assert request.instructions == "keep the test names"
    assert request.encoding == "cl100k_base"


def test_default_summarizer_is_extractive():
    result = compact_messages(history(), POLICY)

    assert result.compacted
    assert result.summarizer == "extractive"
    assert "Goals and key decisions:" in (result.summary or "")
    assert "src/parser.py" in (result.summary or "")


def test_token_counts_can_be_supplied():
    messages = history()
    counts = [5] * len(messages)  # tiny: below the threshold

    assert compact(messages, token_counts=counts).reason == "below_threshold"
    with pytest.raises(ValueError, match="one count per message"):
        compact(messages, token_counts=[1])


def test_steps_report_what_ran():
    result = compact(history())

    [report] = result.steps
    assert (report.step, report.ran, report.changed) == ("summary", True, True)
    assert report.tokens_after < report.tokens_before


# --- events ---------------------------------------------------------------------------------


def test_events_go_to_on_event_and_into_the_result():
    seen: list[CompactionEvent] = []

    result = compact(history(), on_event=seen.append)

    assert tuple(seen) == result.events
    assert [e.phase for e in seen] == [
        "compaction_start",
        "summary_start",
        "retention_check",
        "summary_done",
        "compaction_done",
    ]
    done = seen[-1]
    assert done.tokens_before == result.stats.original_token_count
    assert done.tokens_after == result.stats.compacted_token_count


def test_a_failing_event_handler_does_not_stop_compaction(caplog):
    def explode(event):
        raise RuntimeError("observer bug")

    result = compact(history(), on_event=explode)

    assert result.compacted
    assert "on_event handler failed" in caplog.text


# --- failures and rollback -----------------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "content_none",
        "empty_summary",
        "max_tokens_no_content",
        "thinking_only_no_content",
        "api_error",
        "timeout",
    ],
)
def test_every_failure_reason_rolls_back(reason, clock):
    messages = history()
    summarizer = ScriptedSummarizer(default=SummaryError(reason))

    result = compact(messages, summarizer=summarizer, clock=clock)

    assert not result.compacted
    assert result.reason == reason
    assert result.messages is messages
    assert result.stats == CompactStats()
    rollback = [e for e in result.events if e.phase == "rollback"]
    assert [e.reason for e in rollback] == [reason]
    assert len(summarizer.requests) == 3  # 1 + max_retries


def test_retries_back_off_exponentially(clock):
    summarizer = ScriptedSummarizer(SummaryError("api_error"), SummaryError("timeout"), SUMMARY)

    result = compact(history(), POLICY.replace(retry_backoff_seconds=0.5), summarizer, clock=clock)

    assert result.compacted
    assert len(summarizer.requests) == 3
    assert clock.sleeps == [0.5, 1.0]
    assert result.duration_ms == 1500  # measured on the given clock


def test_zero_retries_means_one_attempt(clock):
    summarizer = ScriptedSummarizer(SummaryError("api_error"), SUMMARY)

    result = compact(history(), POLICY.replace(max_retries=0), summarizer, clock=clock)

    assert result.reason == "api_error"
    assert len(summarizer.requests) == 1
    assert clock.sleeps == []


def test_a_non_retryable_error_is_not_retried(clock):
    summarizer = ScriptedSummarizer(SummaryError("api_error", "HTTP 401", retryable=False), SUMMARY)

    result = compact(history(), summarizer=summarizer, clock=clock)

    assert result.reason == "api_error"
    assert len(summarizer.requests) == 1


def test_an_unexpected_summarizer_exception_is_a_named_failure(clock):
    summarizer = ScriptedSummarizer(default=KeyError("bug"))

    result = compact(history(), summarizer=summarizer, clock=clock)

    assert not result.compacted
    assert result.reason == "summarizer_error"


def test_blank_summary_text_is_empty_summary(clock):
    result = compact(history(), summarizer=ScriptedSummarizer(default="  \n "), clock=clock)

    assert result.reason == "empty_summary"


def test_a_summary_that_saves_nothing_is_rolled_back():
    huge = words(5000)

    result = compact(history(), summarizer=ScriptedSummarizer(huge))

    assert not result.compacted
    assert result.reason == "no_savings"
    assert any(e.phase == "rollback" and e.reason == "no_savings" for e in result.events)


# --- archive (docs/behaviour.md#archives) ---------------------------------------------------------


def test_archive_holds_the_replaced_messages_as_indented_json(tmp_path, clock):
    messages = history()

    result = compact(messages, archive_dir=tmp_path / "a" / "b", session_id="s-1", clock=clock)

    expected = tmp_path / "a" / "b" / "s-1" / "compact-20260217T101500Z-1.json"
    assert result.archive_path == str(expected)
    text = expected.read_text(encoding="utf-8")
    # The middle, and the tail's user message now merged into the summary message.
    assert json.loads(text) == messages[1:-1]
    assert text.startswith("[\n  {")  # indented


def test_same_second_archives_get_the_next_sequence(tmp_path, clock):
    first = compact(history(), archive_dir=tmp_path, session_id="s", clock=clock)
    second = compact(history(), archive_dir=tmp_path, session_id="s", clock=clock)
    other = compact(history(), archive_dir=tmp_path, session_id="t", clock=clock)

    assert Path(first.archive_path or "").name == "compact-20260217T101500Z-1.json"
    assert Path(second.archive_path or "").name == "compact-20260217T101500Z-2.json"
    assert Path(other.archive_path or "").name == "compact-20260217T101500Z-1.json"


def test_archive_store_and_sequence_can_be_given(tmp_path, clock):
    store = LocalBlobStore(tmp_path)

    result = compact(
        history(), archive_store=store, archive_sequence=7, session_id="s", clock=clock
    )

    assert result.archive_path == str(tmp_path / "s" / "compact-20260217T101500Z-7.json")


def test_no_archive_without_a_directory_or_store():
    assert compact(history()).archive_path is None


class BrokenStore:
    def write(self, name, data):
        raise BlobStoreError("disk full")

    def exists(self, name):
        return False


def test_a_failed_archive_write_is_logged_and_not_fatal(caplog):
    caplog.set_level(logging.INFO, logger="compaction")

    result = compact(history(), archive_store=BrokenStore(), session_id="s")

    assert result.compacted
    assert result.archive_path is None
    failed = [e for e in result.events if e.phase == "archive_failed"]
    assert len(failed) == 1
    assert "disk full" in failed[0].detail["error"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors
    assert "archive write failed" in errors[0].getMessage()
    assert errors[0].session_id == "s"


def test_an_archive_directory_that_is_a_file_is_not_fatal(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")

    result = compact(history(), archive_dir=blocker, session_id="s")

    assert result.compacted
    assert any(e.phase == "archive_failed" for e in result.events)


def test_nothing_is_archived_when_the_compaction_rolls_back(tmp_path):
    result = compact(
        history(),
        summarizer=ScriptedSummarizer(default=SummaryError("timeout")),
        policy=POLICY.replace(max_retries=0),
        archive_dir=tmp_path,
        session_id="s",
    )

    assert not result.compacted
    assert list(tmp_path.iterdir()) == []


# --- multi-level compaction (docs/behaviour.md#summaries-of-summaries) ----------------------------


def test_a_second_compaction_summarises_the_first_summary():
    first = compact(history(), summarizer=ScriptedSummarizer("Goals and key decisions:\n- one"))
    grown = [*first.messages, *history()[1:]]
    summarizer = ScriptedSummarizer("Goals and key decisions:\n- one and two")

    second = compact(grown, summarizer=summarizer)

    assert second.compacted
    [request] = summarizer.requests
    assert request.messages[0] is first.messages[1]  # the earlier summary is in the middle
    meta = second.messages[1][SUMMARY_KEY]
    assert meta["level"] == 2
    assert meta["covered_message_count"] == 10 + len(request.messages) - 1
    assert sum(is_summary_message(m) for m in second.messages) == 1


def test_extractive_multi_level_merges_instead_of_nesting():
    first = compact_messages(history(), POLICY)
    grown = [*first.messages, *history()[1:]]

    second = compact_messages(grown, POLICY)

    text = second.summary or ""
    assert SUMMARY_PREFIX not in text
    assert text.count("Goals and key decisions:") == 1
    assert "Fix the parser bug in src/parser.py" in text


# --- structured logging (docs/behaviour.md#structured-logs) ---------------------------------------


def test_outcome_is_logged_with_structured_fields(caplog, clock):
    caplog.set_level(logging.INFO, logger="compaction")

    result = compact(history(), session_id="abc", trigger="manual", clock=clock)

    [record] = [r for r in caplog.records if getattr(r, "outcome", None)]
    assert record.name == "compaction"
    assert record.session_id == "abc"
    assert record.trigger == "manual"
    assert record.tokens_before == result.stats.original_token_count
    assert record.tokens_after == result.stats.compacted_token_count
    assert record.duration_ms == 0
    assert record.outcome == "compacted"


def test_failures_are_logged_as_warnings(caplog, clock):
    caplog.set_level(logging.INFO, logger="compaction")

    compact(
        history(),
        summarizer=ScriptedSummarizer(default=SummaryError("timeout")),
        session_id="abc",
        clock=clock,
    )

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    attempts = [r for r in warnings if getattr(r, "attempt", None)]
    assert [r.attempt for r in attempts] == [1, 2, 3]
    [outcome] = [r for r in warnings if getattr(r, "outcome", None)]
    assert outcome.outcome == "rolled_back"
    assert outcome.reason == "timeout"
