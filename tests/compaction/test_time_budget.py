"""The summarizer phase's wall-clock budget, Policy.summary_time_budget_seconds (issue 10)."""

from __future__ import annotations

from collections.abc import Callable

from compaction import (
    SUMMARY_FAILURES,
    Compactor,
    Policy,
    ScriptedSummarizer,
    SummaryError,
    compact_messages,
)
from compaction.carried_state import without_state_block
from compaction.summarizers.base import SummaryRequest
from tests.support.clock import FakeClock
from tests.support.histories import assistant, exchange, system, user, words

SUMMARY = "Goals and key decisions:\n- go on"


def history() -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [system("agent"), user("Refactor src/app.py please")]
    # A path only the assistant's text names: no state block holds it (the re-ask would).
    messages += [assistant("Notes are in docs/notes.md"), user("ok")]
    for number in range(6):
        messages += exchange(
            f"call_{number}", "Read", {"file_path": f"src/m{number}.py"}, words(150)
        )
    return [*messages, user("thanks " + words(20))]


def policy(**changes: object) -> Policy:
    values: dict[str, object] = {
        "context_limit": 2000,
        "trigger_ratio": 0.5,
        "tail_retention_ratio": 0.05,
        "keep_recent_messages": 2,
        "steps": ("summary",),
        "min_recall": 0,
    }
    return Policy(**{**values, **changes})  # type: ignore[arg-type]


def slow(clock: FakeClock, seconds: float, answer: str | None = None) -> Callable[..., str]:
    """A summarizer attempt that takes `seconds`, then answers or times out."""

    def attempt(request: SummaryRequest) -> str:
        clock.advance(seconds)
        if answer is None:
            raise SummaryError("timeout", f"no answer within {seconds} s")
        return answer

    return attempt


def test_no_retry_starts_once_the_budget_is_spent(clock: FakeClock) -> None:
    # Attempts of 40 s: after the third (123 s with backoff) the next would start past 100 s.
    summarizer = ScriptedSummarizer(default=slow(clock, 40))
    budget = policy(max_retries=5, retry_backoff_seconds=1, summary_time_budget_seconds=100)

    result = compact_messages(history(), budget, summarizer=summarizer, clock=clock, force=True)

    assert not result.compacted
    assert result.reason == "time_budget"
    assert len(summarizer.requests) == 3  # not the 6 that max_retries allows
    assert clock.sleeps == [1, 2]  # no backoff is slept for a retry that will not run
    rollback = next(e for e in result.events if e.phase == "rollback")
    assert rollback.reason == "time_budget"
    assert "100 s summary budget" in rollback.detail["detail"]


def test_a_retry_whose_backoff_ends_past_the_budget_does_not_start(clock: FakeClock) -> None:
    summarizer = ScriptedSummarizer(slow(clock, 5), SUMMARY)
    budget = policy(max_retries=2, retry_backoff_seconds=10, summary_time_budget_seconds=12)

    result = compact_messages(history(), budget, summarizer=summarizer, clock=clock, force=True)

    assert result.reason == "time_budget"
    assert len(summarizer.requests) == 1
    assert clock.sleeps == []


def test_a_slow_first_answer_is_used(clock: FakeClock) -> None:
    # The budget stops retries; it does not cut an attempt that answers.
    summarizer = ScriptedSummarizer(slow(clock, 500, SUMMARY))
    budget = policy(summary_time_budget_seconds=10)

    result = compact_messages(history(), budget, summarizer=summarizer, clock=clock, force=True)

    assert result.compacted
    assert without_state_block(result.summary or "").rstrip() == SUMMARY


def test_retries_within_the_budget_still_run(clock: FakeClock) -> None:
    summarizer = ScriptedSummarizer(slow(clock, 10), slow(clock, 10), SUMMARY)
    budget = policy(max_retries=2, retry_backoff_seconds=1, summary_time_budget_seconds=60)

    result = compact_messages(history(), budget, summarizer=summarizer, clock=clock, force=True)

    assert result.compacted
    assert len(summarizer.requests) == 3


def test_the_retention_retry_is_skipped_past_the_budget(clock: FakeClock) -> None:
    vague = "Goals and key decisions:\n- something vague"
    summarizer = ScriptedSummarizer(slow(clock, 30, vague), default="src/m0.py src/m1.py")
    budget = policy(min_recall=1.0, file_view_tools=(), summary_time_budget_seconds=20)

    result = compact_messages(history(), budget, summarizer=summarizer, clock=clock, force=True)

    assert result.compacted
    assert without_state_block(result.summary or "").rstrip() == vague  # the first, kept
    assert len(summarizer.requests) == 1
    check = next(e for e in result.events if e.phase == "retention_check")
    assert check.reason == "low_recall"  # a second request was wanted


def test_a_spent_budget_counts_as_a_summary_failure_for_the_cooldown() -> None:
    clock = FakeClock()
    summarizer = ScriptedSummarizer(default=slow(clock, 40))
    budget = policy(max_retries=3, summary_time_budget_seconds=50, cooldown_seconds=8)
    compactor = Compactor(budget, summarizer, clock=clock)

    result = compactor.compact(history(), force=True)

    assert "time_budget" in SUMMARY_FAILURES
    assert result.reason == "time_budget"
    assert compactor.cooldown_remaining == 8
