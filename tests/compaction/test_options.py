"""`CompactOptions` (one value for a run's options), `CallerSummary`, and the summary
outcome being dropped on a rollback."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from compaction import (
    CallerSummary,
    CompactOptions,
    CompactResult,
    Policy,
    ScriptedSummarizer,
    Summarizer,
    SummaryRequest,
    TruncateResult,
    compact_messages,
    count_tokens,
)
from compaction.carried_state import without_state_block
from tests.support.clock import FakeClock
from tests.support.histories import assistant, exchange, system, user, words

SUMMARY = "Goals and key decisions:\n- fix the parser"
POLICY = Policy(
    context_limit=1000,
    trigger_ratio=0.5,
    tail_retention_ratio=0.1,
    keep_recent_messages=2,
    steps=("summary",),
    min_recall=0,
)


def history() -> list[dict[str, Any]]:
    return [
        system("You are a coding agent."),
        user("Fix the parser bug in src/parser.py " + words(90)),
        *exchange("toolu_1", "Read", {"file_path": "src/parser.py"}, words(100, "beta")),
        assistant(words(100, "gamma")),
        user("Now run the tests " + words(90)),
        assistant(words(100, "epsilon")),
        user("And the docs " + words(90)),
        assistant(words(100, "eta")),
    ]


def essentials(result: CompactResult) -> tuple[Any, ...]:
    return (result.messages, result.compacted, result.summary, result.reason, result.steps)


def test_options_and_keywords_give_the_same_run() -> None:
    messages = history()
    clock = FakeClock()
    by_keywords = compact_messages(
        messages,
        POLICY,
        summarizer=ScriptedSummarizer(default=SUMMARY),
        session_id="s1",
        clock=clock,
    )
    options = CompactOptions(
        summarizer=ScriptedSummarizer(default=SUMMARY), session_id="s1", clock=clock
    )
    by_options = compact_messages(messages, POLICY, options=options)

    assert by_keywords.compacted
    assert essentials(by_options) == essentials(by_keywords)


def test_a_given_keyword_overrides_the_options_field() -> None:
    options = CompactOptions(summarizer=ScriptedSummarizer(default="from the options"))

    result = compact_messages(
        history(), POLICY, options=options, summarizer=ScriptedSummarizer(default=SUMMARY)
    )

    assert without_state_block(result.summary or "").rstrip() == SUMMARY


def test_force_in_the_options_compacts_under_the_threshold() -> None:
    messages = history()[:6]
    relaxed = POLICY.replace(context_limit=100_000)
    options = CompactOptions(summarizer=ScriptedSummarizer(default=SUMMARY))

    assert compact_messages(messages, relaxed, options=options).reason == "below_threshold"
    assert compact_messages(messages, relaxed, options=options.replace(force=True)).compacted


def test_cached_counts_in_the_options_are_used_not_recounted() -> None:
    messages = history()
    options = CompactOptions(summarizer=ScriptedSummarizer(default=SUMMARY))

    tiny = compact_messages(messages, POLICY, options=options.replace(token_counts=[1] * 9))

    assert count_tokens(messages) > POLICY.threshold
    assert tiny.reason == "below_threshold"


def test_options_are_frozen_and_refuse_unknown_names() -> None:
    options = CompactOptions()

    with pytest.raises(dataclasses.FrozenInstanceError):
        options.force = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        options.replace(forse=True)
    assert options.with_given(force=None, trigger="api") == CompactOptions(trigger="api")


def test_the_callers_summary_is_used_and_named() -> None:
    caller = CallerSummary("The agent's own summary.", name="caller")

    result = compact_messages(history(), POLICY, options=CompactOptions(summarizer=caller))

    assert isinstance(caller, Summarizer)
    assert caller.summarize(SummaryRequest(messages=[])) == "The agent's own summary."
    assert result.compacted
    assert result.summary == "The agent's own summary."
    assert result.summarizer == "caller"


def test_a_rollback_after_the_summary_drops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The summary commits, then a fallback produces an invalid request: the whole run rolls
    # back and nothing of the summary (text, partition, recall) is reported.
    def broken(messages: Any, policy: Any = None) -> TruncateResult:
        return TruncateResult([*messages, assistant("")], True, 0, 0)

    monkeypatch.setattr(importlib.import_module("compaction.chain_steps"), "smart_truncate", broken)
    policy = POLICY.replace(context_limit=300, steps=("summary", "smart_truncate"))
    messages = history()

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(default=SUMMARY))

    assert not result.compacted
    assert result.reason == "invalid_output"
    assert result.messages is messages
    assert (result.summary, result.partition, result.summarizer) == (None, None, None)
    assert result.stats.recall is None
    assert [e.phase for e in result.events if e.phase in {"summary_done", "rollback"}] == [
        "summary_done",
        "rollback",
    ]
