"""Policy.reserved_tokens: a system prompt and tools sent beside the messages count with
them against the threshold and the hard limit (docs/behaviour.md#reserved-tokens)."""

from __future__ import annotations

import pytest

from compaction import (
    Policy,
    PolicyError,
    ScriptedSummarizer,
    compact_messages,
    count_tokens,
    hard_truncate,
    should_compact,
)
from compaction.hard_truncate import hard_limit_tokens
from tests.support.histories import coding_history as history
from tests.support.histories import qa_conversation as conversation
from tests.support.histories import user, words


def test_they_count_with_the_messages_against_the_threshold() -> None:
    messages = [user(words(50))]
    tokens = count_tokens(messages)
    under = Policy(context_limit=tokens * 4, trigger_ratio=0.5, steps=("summary",))
    assert should_compact(messages, under) is False
    assert should_compact(messages, under.replace(reserved_tokens=tokens)) is True
    assert should_compact(messages, under.replace(reserved_tokens=tokens - 1)) is False


def test_they_are_never_negative() -> None:
    with pytest.raises(PolicyError, match="reserved_tokens"):
        Policy(reserved_tokens=-1)


def test_they_bring_a_context_to_the_threshold_and_the_result_under_it() -> None:
    messages = history()  # ~1100 tokens, under the threshold of 1500
    policy = Policy(
        context_limit=3000,
        trigger_ratio=0.5,
        tail_retention_ratio=0.1,
        keep_recent_messages=2,
        steps=("summary",),
        min_recall=0,
    )
    summarizer = ScriptedSummarizer(default="Goals:\n- fix the parser")
    assert compact_messages(messages, policy, summarizer=summarizer).reason == "below_threshold"
    reserving = policy.replace(reserved_tokens=600)

    result = compact_messages(messages, reserving, summarizer=summarizer)

    assert result.compacted
    assert result.stats.original_token_count == count_tokens(messages)  # the messages' own
    assert not reserving.over_threshold(result.stats.compacted_token_count)


def test_hard_truncation_leaves_them_room() -> None:
    policy = Policy(context_limit=2000, trigger_ratio=0.5, safety_factor=1.5, reserved_tokens=300)

    result = hard_truncate(conversation(20), policy)

    assert hard_limit_tokens(policy) == 1033  # 1333 raw tokens fit 2000 scaled, less 300
    assert result.truncated
    assert policy.scaled(count_tokens(result.messages) + 300) <= 2000
    assert not policy.over_hard_limit(result.tokens_after)


def test_hard_truncation_refuses_when_they_alone_leave_no_room() -> None:
    policy = Policy(context_limit=2000, trigger_ratio=0.5, reserved_tokens=5000)
    assert hard_limit_tokens(policy) == 0
    with pytest.raises(PolicyError):
        hard_truncate(conversation(20), policy)


def test_the_chain_survives_them_passing_the_hard_limit() -> None:
    # A forced run (a manual compaction): the hard_truncate fallback cannot fit anything;
    # the chain logs it and keeps what the steps before it did.
    messages = history()
    policy = Policy(context_limit=2000, trigger_ratio=0.5, reserved_tokens=5000, min_recall=0)
    summarizer = ScriptedSummarizer(default="Goals:\n- fix the parser")

    result = compact_messages(messages, policy, summarizer=summarizer, force=True)

    assert result.compacted  # the summary still shrank the messages
    assert result.stats.compacted_token_count < count_tokens(messages)


def test_an_unforced_run_skips_when_they_alone_reach_the_threshold() -> None:
    # Compacting would not bring the call under the threshold, and would run on every call.
    policy = Policy(context_limit=3000, trigger_ratio=0.5, reserved_tokens=1500, min_recall=0)
    summarizer = ScriptedSummarizer(default="Goals:\n- fix the parser")

    skipped = compact_messages(history(), policy, summarizer=summarizer)
    forced = compact_messages(history(), policy, summarizer=summarizer, force=True)

    assert (skipped.compacted, skipped.reason) == (False, "reserved_over_threshold")
    assert skipped.events == ()
    assert forced.compacted
