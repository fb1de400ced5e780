"""`Policy.max_summary_calls` bounds the summary requests of one compaction (issue 30 item 5,
docs/behaviour.md#summary-call-limit): a middle that needs more parts is refused with
`too_many_summary_calls` before any request; no run ever makes more requests than the bound."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import (
    CompactResult,
    ExtractiveSummarizer,
    Policy,
    PolicyError,
    SummaryRequest,
    compact_messages,
)
from compaction.messages import is_summary_message
from tests.support.clock import FakeClock
from tests.support.histories import synthetic_history

#: About 13k tokens: with an input limit of 2,000, a middle of a dozen parts.
HISTORY = synthetic_history(120, words_per_message=150)
POLICY = Policy(
    context_limit=20_000,
    steps=("summary",),
    summary_input_limit=2_000,
    keep_recent_messages=4,
    tail_retention_ratio=0.05,
    min_recall=0,
)


class Counting:
    """The extractive summarizer, counting the requests it gets."""

    name = "counting"

    def __init__(self, *, drop_everything: bool = False) -> None:
        self.calls = 0
        self.drop_everything = drop_everything

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.drop_everything:  # a summary that keeps no identifier: low recall
            return "Nothing worth keeping."
        return ExtractiveSummarizer().summarize(request)


def run(policy: Policy, summarizer: Counting) -> CompactResult:
    return compact_messages(HISTORY, policy, summarizer=summarizer, clock=FakeClock(), force=True)


def test_the_default_bound_is_32() -> None:
    assert Policy().max_summary_calls == 32
    assert Policy.from_dict({**Policy().to_dict(), "max_summary_calls": 5}).max_summary_calls == 5


@pytest.mark.parametrize("value", [0, -1, 10_001, 2.5, True, "32"])
def test_a_bound_out_of_range_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(PolicyError) as info:
        Policy(max_summary_calls=value)  # type: ignore[arg-type]
    assert info.value.field == "max_summary_calls"


def test_without_a_bound_in_the_way_the_middle_takes_many_requests() -> None:
    counting = Counting()
    result = run(POLICY, counting)
    assert result.compacted
    assert 8 <= counting.calls <= POLICY.max_summary_calls


def test_a_middle_needing_more_parts_is_refused_before_any_request() -> None:
    counting = Counting()
    result = run(POLICY.replace(max_summary_calls=4), counting)
    assert not result.compacted
    assert result.reason == "too_many_summary_calls"
    assert counting.calls == 0
    assert result.messages == HISTORY


def test_a_refused_summary_falls_back_to_the_next_step() -> None:
    counting = Counting()
    policy = POLICY.replace(max_summary_calls=4, steps=("summary", "hard_truncate"))
    result = run(policy, counting)
    assert counting.calls == 0
    steps = {s.step: s for s in result.steps}
    assert steps["summary"].detail["why"] == "failed: too_many_summary_calls"
    assert "hard_truncate" in steps  # the chain went on (here under the hard limit: no change)
    assert not any(is_summary_message(m) for m in result.messages)


def test_the_retention_retry_is_not_made_past_the_bound() -> None:
    # A middle that fits one request, a summary that keeps no identifier: recall is low and
    # the run would ask again, but a bound of 1 allows only the first request.
    history = synthetic_history(30, words_per_message=30)
    policy = POLICY.replace(summary_input_limit=100_000, min_recall=1.0)
    asked_again = Counting(drop_everything=True)
    compact_messages(history, policy, summarizer=asked_again, clock=FakeClock(), force=True)
    assert asked_again.calls == 2
    bounded = Counting(drop_everything=True)
    result = compact_messages(
        history,
        policy.replace(max_summary_calls=1),
        summarizer=bounded,
        clock=FakeClock(),
        force=True,
    )
    assert bounded.calls == 1
    assert result.compacted


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bound=st.integers(min_value=1, max_value=24), limit=st.sampled_from([2_000, 3_000, 5_000]))
def test_no_run_makes_more_requests_than_the_bound(bound: int, limit: int) -> None:
    counting = Counting()
    result = run(POLICY.replace(max_summary_calls=bound, summary_input_limit=limit), counting)
    assert counting.calls <= bound
    assert result.compacted or result.reason == "too_many_summary_calls"
