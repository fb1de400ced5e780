"""Round protection reads only the newest rounds: the same round starts as a full scan."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.messages import round_starts
from compaction.partition import _newest_round_starts
from tests.support.histories import histories


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_rounds=8), st.integers(0, 4), st.integers(1, 6))
def test_the_newest_round_starts_are_the_last_of_all_round_starts(history, head_end, rounds):
    head_end = min(head_end, len(history))
    expected = [index for index in round_starts(history) if index >= head_end][-rounds:]
    assert _newest_round_starts(history, head_end, rounds) == expected
