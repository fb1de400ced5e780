"""Compaction records keep the limits in force when they ran (services/compacting/writeback.py
`policy_in_force`, filled by commit_context and record_failure)."""

from __future__ import annotations

from typing import Any

import pytest

from compaction import ScriptedSummarizer, SummaryError
from sessions_app.models import CompactionProfile, Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.compacting.writeback import policy_in_force
from sessions_app.services.sessions.policies import policy_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"], trigger_ratio=0.5)
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def test_a_compaction_keeps_the_limits_it_ran_under(session: Session) -> None:
    outcome = compact_session(session, summarizer=ScriptedSummarizer(default="summary one"))
    first = outcome.compaction
    assert first is not None
    assert (first.context_limit, first.threshold_tokens, first.hard_limit) == (3000, 1500, 3000)
    # The profile changes: the next record has the new limits, the first keeps its own.
    assert session.profile_id is not None
    CompactionProfile.objects.filter(pk=session.profile_id).update(
        trigger_ratio=0.8, hard_limit=2900
    )
    in_force = policy_for(session)  # the hard limit scaled to the session's own limit
    later = compact_session(session, summarizer=ScriptedSummarizer(default="summary two"))
    assert later.compaction is not None
    assert later.compaction.threshold_tokens == 2400
    assert later.compaction.hard_limit == in_force.effective_hard_limit
    first.refresh_from_db()
    assert first.threshold_tokens == 1500


def test_a_failed_attempt_keeps_the_limits_too(session: Session) -> None:
    failing = ScriptedSummarizer(default=SummaryError("api_error", "529 overloaded"))
    outcome = compact_session(session, summarizer=failing)
    assert outcome.failed
    assert outcome.compaction is not None
    assert outcome.compaction.threshold_tokens == 1500
    assert outcome.compaction.context_limit == 3000


@pytest.mark.parametrize(
    "details",
    [{}, {"policy": None}, {"policy": {"context_limit": "x"}}, {"policy": []}],
)
def test_no_recorded_policy_means_unknown_limits(details: dict[str, Any]) -> None:
    assert policy_in_force(details) == {
        "context_limit": None,
        "threshold_tokens": None,
        "hard_limit": None,
    }
