"""Compactor: repeated compaction of one session with the cooldown (docs/behaviour.md#cooldown)."""

from __future__ import annotations

import pytest

from compaction import Compactor, Policy, ScriptedSummarizer, SummaryError, count_tokens
from tests.support.histories import assistant, system, user, words

SUMMARY = "Goals and key decisions:\n- keep going"


def history(pairs: int = 6) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [system("s")]
    for number in range(pairs):
        messages += [user(f"q{number} " + words(80)), assistant(words(80))]
    return messages


POLICY = Policy(
    context_limit=1000,
    trigger_ratio=0.5,
    tail_retention_ratio=0.1,
    keep_recent_messages=2,
    steps=("summary",),
    max_retries=0,
    min_recall=0,
)


def test_compacts_with_its_policy_and_summarizer(clock, tmp_path):
    summarizer = ScriptedSummarizer(default=SUMMARY)
    compactor = Compactor(POLICY, summarizer, clock=clock, archive_dir=tmp_path, session_id="s")

    assert compactor.should_compact(history())
    result = compactor.compact(history(), instructions="keep ids")

    assert result.compacted
    assert summarizer.requests[0].instructions == "keep ids"
    assert result.archive_path
    assert result.archive_path.startswith(str(tmp_path / "s"))


def test_a_failed_summary_starts_the_cooldown(clock):
    summarizer = ScriptedSummarizer(SummaryError("api_error"), default=SUMMARY)
    compactor = Compactor(POLICY, summarizer, clock=clock)

    first = compactor.compact(history())
    assert first.reason == "api_error"
    assert compactor.cooldown_remaining == pytest.approx(8.0)

    skipped = compactor.compact(history())
    assert not skipped.compacted
    assert skipped.reason == "cooldown"
    assert len(summarizer.requests) == 1  # not asked while cooling down

    clock.advance(8.0)
    assert compactor.cooldown_remaining == 0
    assert compactor.compact(history()).compacted
    assert compactor.consecutive_failures == 0


def test_cooldown_length_comes_from_the_policy(clock):
    compactor = Compactor(
        POLICY.replace(cooldown_seconds=2.5),
        ScriptedSummarizer(SummaryError("timeout"), default=SUMMARY),
        clock=clock,
    )
    compactor.compact(history())

    clock.advance(2.4)
    assert compactor.compact(history()).reason == "cooldown"
    clock.advance(0.1)
    assert compactor.compact(history()).compacted


def test_cooldown_after_several_consecutive_failures(clock):
    summarizer = ScriptedSummarizer(
        SummaryError("timeout"), SummaryError("timeout"), default=SUMMARY
    )
    compactor = Compactor(POLICY, summarizer, clock=clock, failures_before_cooldown=2)

    compactor.compact(history())
    assert compactor.cooldown_remaining == 0
    compactor.compact(history())
    assert compactor.cooldown_remaining > 0
    assert compactor.consecutive_failures == 2


def test_nothing_to_compact_is_not_a_failure(clock):
    compactor = Compactor(POLICY, ScriptedSummarizer(default=SUMMARY), clock=clock)

    result = compactor.compact([system("s"), user(words(900))])

    assert result.reason == "nothing_to_compact"
    assert compactor.cooldown_remaining == 0


def test_over_the_hard_limit_the_fallback_still_runs_while_cooling_down(clock):
    policy = POLICY.replace(steps=("summary", "hard_truncate"), hard_limit=900)
    summarizer = ScriptedSummarizer(SummaryError("api_error"), default=SUMMARY)
    compactor = Compactor(policy, summarizer, clock=clock)
    first = compactor.compact(history(4))  # over the threshold, under the hard limit
    assert first.reason == "api_error"

    big = history(12)
    result = compactor.compact(big)

    assert result.reason == "cooldown"
    assert result.compacted
    assert count_tokens(result.messages) <= 900
    assert len(summarizer.requests) == 1


def test_failures_before_cooldown_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        Compactor(failures_before_cooldown=0)
