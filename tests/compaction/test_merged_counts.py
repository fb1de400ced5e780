"""Merging messages adds and removes no token: a merged message's count is the sum of its
parts' counts (`compact_messages` sums them instead of counting the merged texts again)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import compact_messages, message_token_counts, message_tokens
from compaction.alternation import merge_run
from compaction.policy import Policy
from tests.support.histories import histories


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_rounds=5), st.data())
def test_a_merged_run_counts_the_sum_of_its_messages(history, data):
    start = data.draw(st.integers(0, len(history) - 1))
    run = history[start : start + data.draw(st.integers(1, 4))]
    assert message_tokens(merge_run(run)) == sum(message_tokens(m) for m in run)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_rounds=8), st.integers(0, 3))
def test_a_compaction_counts_its_merged_output_as_a_fresh_count_would(history, keep):
    policy = Policy(tool_blocks_keep_recent=keep, keep_recent_messages=2)
    result = compact_messages(
        history, policy, force=True, token_counts=message_token_counts(history)
    )
    if result.compacted:
        assert result.stats.compacted_token_count == sum(message_token_counts(result.messages))
