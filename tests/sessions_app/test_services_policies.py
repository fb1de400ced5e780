"""sessions_app.services.policies: profiles read fresh, policies, summarizer choice."""

from __future__ import annotations

from typing import Any

import pytest

from compaction import PolicyError
from compaction.summarizers.anthropic import AnthropicSummarizer
from compaction.summarizers.extractive import ExtractiveSummarizer
from sessions_app.models import CompactionProfile
from sessions_app.services.policies import policy_for, profile_for, summarizer_for

pytestmark = pytest.mark.django_db


def test_the_default_profile_is_balanced(make_session: Any) -> None:
    session = make_session(messages=[])
    assert profile_for(session).name == "balanced"
    assert policy_for(session).steps == ("selective", "summary", "smart_truncate", "hard_truncate")


def test_a_named_profile_wins_and_an_unknown_name_is_a_policy_error(make_session: Any) -> None:
    session = make_session(messages=[], profile="selective")
    assert profile_for(session).name == "selective"
    assert profile_for(session, "offload").name == "offload"
    with pytest.raises(PolicyError) as info:
        profile_for(session, "nope")
    assert info.value.field == "profile"
    assert "balanced" in str(info.value)


def test_profiles_are_read_fresh_on_every_call(make_session: Any, make_profile: Any) -> None:
    profile = make_profile(trigger_ratio=0.5)
    session = make_session(messages=[], profile=profile)
    assert policy_for(session).trigger_ratio == 0.5
    CompactionProfile.objects.filter(pk=profile.pk).update(trigger_ratio=0.7)
    assert policy_for(session).trigger_ratio == 0.7


def test_the_session_limit_overrides_and_scales_the_hard_limit(
    make_session: Any, make_profile: Any
) -> None:
    profile = make_profile(context_limit=100_000, hard_limit=95_000)
    session = make_session(messages=[], profile=profile, context_limit=10_000)
    policy = policy_for(session)
    assert policy.context_limit == 10_000
    assert policy.hard_limit == 9_500


def test_auto_is_extractive_without_a_key(settings: Any, make_profile: Any) -> None:
    settings.ANTHROPIC_API_KEY = ""
    assert isinstance(summarizer_for(make_profile(summarizer="auto")), ExtractiveSummarizer)


def test_auto_is_anthropic_with_a_key_and_a_model(settings: Any, make_profile: Any) -> None:
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.CTXWEB_SUMMARY_MODEL = "claude-test"
    summarizer = summarizer_for(make_profile(summarizer="auto", summary_max_tokens=700))
    assert isinstance(summarizer, AnthropicSummarizer)
    assert summarizer.model == "claude-test"
    assert summarizer.max_tokens == 700
    named = summarizer_for(make_profile("other", summarizer="auto", summary_model="claude-x"))
    assert isinstance(named, AnthropicSummarizer)
    assert named.model == "claude-x"


def test_anthropic_without_a_model_is_a_policy_error(settings: Any, make_profile: Any) -> None:
    settings.CTXWEB_SUMMARY_MODEL = ""
    with pytest.raises(PolicyError):
        summarizer_for(make_profile(summarizer="anthropic"))


def test_an_api_compaction_through_the_anthropic_summarizer(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any
) -> None:
    from sessions_app.services.session_compaction import compact_session
    from tests.support.fake_anthropic import FakeAnthropic, Reply

    with FakeAnthropic() as fake:
        fake.script(Reply.overloaded(), Reply.text("Goals and key decisions:\n- from the model"))
        settings.ANTHROPIC_API_KEY = "sk-test"
        settings.ANTHROPIC_BASE_URL = fake.base_url
        profile = make_profile(
            summarizer="auto",
            summary_model="claude-test",
            keep_recent_messages=4,
            steps=["summary"],
        )
        session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
        compaction = compact_session(session).compaction
        assert compaction is not None
        assert compaction.status == "succeeded"
        assert compaction.summarizer == "anthropic"
        assert compaction.model == "claude-test"
        assert compaction.summary.endswith("from the model")
        assert len(fake.requests) >= 2  # the 529, then the answer (maybe a retention retry)
        assert {r.body["model"] for r in fake.requests} == {"claude-test"}
        assert "summary_retry" in [e["phase"] for e in compaction.details["events"]]
