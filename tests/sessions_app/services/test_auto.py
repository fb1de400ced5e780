"""sessions_app.services.compacting.auto: prepare_context (docs/behaviour.md#pre-call-check,
#hard-truncation,
cooldown) and the post-call check."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from compaction import SummaryError, is_summary_message
from sessions_app.models import Compaction, CompactionJob, CompactionProfile, Session
from sessions_app.services.background.cooldown import in_cooldown, note_outcome
from sessions_app.services.background.jobs import run_job
from sessions_app.services.compacting.auto import post_call_check, prepare_context
from sessions_app.services.compacting.session_compaction import CompactionOutcome
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.sessions.usage import usage_tokens
from tests.support.histories import assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile(make_profile: Any) -> CompactionProfile:
    made: CompactionProfile = make_profile(
        keep_recent_messages=4,
        steps=["summary"],
        cooldown_seconds=60,
        context_limit=2500,
        hard_limit=3000,
        prepare_at=None,  # compacts in the request (prepared ones: test_prepared_*.py)
    )
    return made


def big_session(
    make_session: Any, profile: CompactionProfile, conversation: Any, **kw: Any
) -> Session:
    made: Session = make_session(messages=conversation(12), profile=profile, **kw)
    return made


def test_under_the_threshold_nothing_is_compacted(
    make_session: Any, profile: CompactionProfile, scripted: Any
) -> None:
    summarizer = scripted(default="unused")
    session = make_session(messages=[user("hi")], profile=profile)
    payload = prepare_context(session)
    assert payload.compaction is None
    assert payload.skipped == "below_threshold"
    assert payload.messages == [{"role": "user", "content": "hi"}]
    assert summarizer.requests == []


def test_over_the_threshold_it_compacts_first_then_returns_the_context(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default="Goals and key decisions:\n- keep going")
    session = big_session(make_session, profile, conversation)
    before = session.context_tokens
    payload = prepare_context(session)
    assert payload.compaction is not None
    assert payload.compaction.trigger == "auto"
    assert payload.compaction.status == "succeeded"
    assert payload.tokens < before
    assert any("keep going" in str(m["content"]) for m in payload.messages)
    assert set(payload.to_dict()) >= {"system", "messages", "tokens", "limit", "usage"}


def test_a_failed_compaction_is_logged_and_the_context_returned_then_cools_down(
    make_session: Any,
    profile: CompactionProfile,
    conversation: Any,
    scripted: Any,
    caplog: Any,
) -> None:
    summarizer = scripted(default=SummaryError("api_error", "overloaded", retryable=False))
    session = big_session(make_session, profile, conversation)
    with caplog.at_level(logging.WARNING, logger="sessions_app"):
        payload = prepare_context(session)
    assert payload.compaction is not None
    assert payload.compaction.status == "failed"
    assert payload.compaction.failure_reason == "api_error"
    assert payload.tokens == session.context_tokens
    assert any("failed" in record.getMessage() for record in caplog.records)
    assert in_cooldown(session)
    asked = len(summarizer.requests)
    again = prepare_context(session)
    assert again.skipped == "cooldown"
    assert again.compaction is None
    assert len(summarizer.requests) == asked
    Session.objects.filter(pk=session.pk).update(cooldown_until=None)
    prepare_context(session)
    assert len(summarizer.requests) > asked


def test_over_the_hard_limit_after_a_failed_summary_it_truncates(
    make_session: Any, make_profile: Any, conversation: Any, scripted: Any
) -> None:
    scripted(default=SummaryError("timeout", "slow", retryable=False))
    profile = make_profile(
        keep_recent_messages=4, steps=["summary"], context_limit=2500, hard_limit=2400
    )
    session = make_session(messages=conversation(12), profile=profile)
    assert session.context_tokens > 2400
    payload = prepare_context(session)
    assert payload.tokens <= 2400
    truncation = Compaction.objects.get(session=session, trigger="hard_limit")
    assert truncation.status == "succeeded"
    assert payload.compaction is not None
    assert payload.compaction.number == truncation.number
    assert payload.messages[-1] == {
        "role": runtime_messages(session)[-1]["role"],
        "content": runtime_messages(session)[-1]["content"],
    }


def test_a_system_prompt_and_tools_over_the_hard_limit_leave_the_context_as_it_is(
    make_session: Any,
    make_profile: Any,
    conversation: Any,
    scripted: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A proxied session whose stored system prompt and tools alone pass the hard limit
    # (docs/behaviour.md#reserved-tokens): nothing can be truncated to fit; no error.
    scripted(default=SummaryError("timeout", "slow", retryable=False))
    profile = make_profile(steps=["summary"], context_limit=2500, hard_limit=2400)
    session = make_session(messages=conversation(12), profile=profile)
    Session.objects.filter(pk=session.pk).update(
        proxy_state={"system_tokens": 2000, "tools_tokens": 1000}
    )
    session.refresh_from_db()
    before = runtime_messages(session)

    with caplog.at_level(logging.WARNING, logger="sessions_app"):
        payload = prepare_context(session)

    assert runtime_messages(session) == before
    assert not Compaction.objects.filter(session=session, trigger="hard_limit").exists()
    assert payload.tokens == session.context_tokens + 3000
    assert "hard-limit truncation impossible" in caplog.text


def test_a_profile_change_applies_to_the_next_compaction(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default="summary")
    CompactionProfile.objects.filter(pk=profile.pk).update(context_limit=200_000, hard_limit=None)
    session = make_session(messages=conversation(12), profile=profile)
    assert prepare_context(session).skipped == "below_threshold"
    CompactionProfile.objects.filter(pk=profile.pk).update(context_limit=2500)
    payload = prepare_context(session)
    assert payload.compaction is not None
    assert payload.limit == 2500


def test_disabled_profiles_never_compact(
    make_session: Any, make_profile: Any, conversation: Any, scripted: Any
) -> None:
    scripted(default="summary")
    profile = make_profile(enabled=False)
    session = make_session(messages=conversation(12), context_limit=2500, profile=profile)
    payload = prepare_context(session)
    assert payload.skipped == "disabled"
    assert not [m for m in runtime_messages(session) if is_summary_message(m)]


def test_post_call_check_records_usage_and_queues_when_over(
    make_session: Any, profile: CompactionProfile
) -> None:
    session = make_session(messages=[user("hi")], context_limit=10_000, profile=profile)
    reply = assistant("x", usage={"input_tokens": 9000, "output_tokens": 500})
    job = post_call_check(session, [reply])
    assert job is not None
    assert job.params == {"trigger": "auto", "force": True}
    last_usage = Session.objects.get(pk=session.pk).last_usage
    assert last_usage is not None
    assert last_usage["total_tokens"] == 9500
    # A second over-threshold reply while the job is queued queues nothing more.
    assert post_call_check(session, [reply]) is None
    assert CompactionJob.objects.count() == 1


def test_a_job_queued_by_real_usage_compacts_though_the_stored_count_is_lower(
    make_session: Any, profile: CompactionProfile, conversation: Any
) -> None:
    # The stored messages are far under the threshold; the model says the call was over it
    # (tool definitions and overheads count there too), so the queued job must compact.
    session = make_session(messages=conversation(12), context_limit=100_000, profile=profile)
    reply = assistant("x", usage={"input_tokens": 95_000, "output_tokens": 500})
    job = post_call_check(session, [reply])
    assert job is not None

    outcome = run_job(str(job.pk))

    job.refresh_from_db()
    assert job.status == CompactionJob.Status.SUCCEEDED, outcome
    assert [m for m in runtime_messages(session) if is_summary_message(m)]


def test_post_call_check_queues_nothing_when_the_system_prompt_and_tools_fill_the_window(
    make_session: Any, profile: CompactionProfile, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(messages=[user("hi")], context_limit=10_000, profile=profile)
    Session.objects.filter(pk=session.pk).update(
        proxy_state={"system_tokens": 2000, "tools_tokens": 8000}
    )
    session.refresh_from_db()
    reply = assistant("x", usage={"input_tokens": 10_100, "output_tokens": 50})

    with caplog.at_level(logging.WARNING, logger="sessions_app"):
        assert post_call_check(session, [reply]) is None

    assert CompactionJob.objects.count() == 0
    assert "window is too small" in caplog.text
    stored = Session.objects.get(pk=session.pk).last_usage
    assert stored is not None
    assert stored["total_tokens"] == 10_150  # still recorded


def test_post_call_check_ignores_messages_without_usage(make_session: Any) -> None:
    session = make_session(messages=[user("hi")])
    assert post_call_check(session, [assistant("x")]) is None
    assert Session.objects.get(pk=session.pk).last_usage is None


@pytest.mark.parametrize(
    ("usage", "total"),
    [
        ({"input_tokens": 10, "output_tokens": 5}, 15),
        ({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100}, 115),
        ({"prompt_tokens": 7, "completion_tokens": 3}, 10),
        ({"total_tokens": 42}, 42),
    ],
)
def test_usage_tokens(usage: dict[str, int], total: int) -> None:
    assert usage_tokens(usage) == total


def test_a_failure_is_counted_in_the_database_not_on_a_stale_copy(
    make_session: Any, profile: CompactionProfile
) -> None:
    session = make_session(messages=[user("hi")], profile=profile)
    stale = Session.objects.get(pk=session.pk)
    Session.objects.filter(pk=session.pk).update(compaction_failures=2)  # counted elsewhere
    failed = CompactionOutcome(compaction=Compaction(status="failed"), result=None)
    note_outcome(stale, failed, profile)
    assert Session.objects.get(pk=session.pk).compaction_failures == 3
    assert stale.compaction_failures == 3
    assert stale.cooldown_until is not None
    assert in_cooldown(session)


def test_prepare_context_skips_when_the_system_prompt_and_tools_fill_the_window(
    make_session: Any, make_profile: Any, conversation: Any, scripted: Any
) -> None:
    summarizer = scripted(default="summary")
    profile = make_profile(context_limit=20_000, hard_limit=None)
    session = make_session(messages=conversation(4), profile=profile)
    Session.objects.filter(pk=session.pk).update(
        proxy_state={"system_tokens": 9500, "tools_tokens": 9500}
    )
    session.refresh_from_db()

    payload = prepare_context(session)

    assert payload.skipped == "reserved_over_threshold"
    assert payload.compaction is None
    assert summarizer.requests == []
