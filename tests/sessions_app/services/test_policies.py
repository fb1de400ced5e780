"""sessions_app.services.sessions.policies: profiles read fresh, policies, summarizer choice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compaction import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    OpenAISummarizer,
    PolicyError,
    SummaryRequest,
)
from compaction.carried_state import STATE_CLOSE, STATE_OPEN
from sessions_app.models import CompactionProfile, SummarizerConfig
from sessions_app.services.errors import InvalidInput, Unavailable
from sessions_app.services.sessions.policies import (
    policy_for,
    profile_for,
    summarizer_for,
    summary_model,
)

pytestmark = pytest.mark.django_db


def narrative_and_block(summary: str) -> tuple[str, str]:
    """A summary split into the summarizer's text and the `<session-state>` block the engine
    ends it with (docs/behaviour.md#what-a-summary-always-keeps)."""
    narrative, separator, rest = summary.partition(f"\n\n{STATE_OPEN}\n")
    assert separator, f"no state block in {summary!r}"
    block = f"{STATE_OPEN}\n{rest}"
    assert block.endswith(f"\n{STATE_CLOSE}"), block
    assert block.count(STATE_OPEN) == block.count(STATE_CLOSE) == 1, block
    return narrative, block


def sent_texts(body: Any) -> Iterator[str]:
    """Every string of a request body sent to a model (its prompt's texts among them)."""
    if isinstance(body, str):
        yield body
    elif isinstance(body, dict):
        for value in body.values():
            yield from sent_texts(value)
    elif isinstance(body, list):
        for item in body:
            yield from sent_texts(item)


def test_the_default_profile_is_balanced(make_session: Any) -> None:
    session = make_session(messages=[])
    assert profile_for(session).name == "balanced"
    assert policy_for(session).steps == ("selective", "summary", "smart_truncate", "hard_truncate")


def test_a_named_profile_wins_and_an_unknown_name_is_invalid_input(make_session: Any) -> None:
    session = make_session(messages=[], profile="selective")
    assert profile_for(session).name == "selective"
    assert profile_for(session, "offload").name == "offload"
    with pytest.raises(InvalidInput) as info:
        profile_for(session, "nope")
    assert info.value.first.path == "profile"
    assert "balanced" in info.value.first.message
    # The service's own error, no longer also the engine's PolicyError.
    error: Exception = info.value
    assert not isinstance(error, PolicyError)
    assert str(error).startswith("profile: unknown profile 'nope'; known: ")


def test_a_stored_profile_the_engine_refuses_is_invalid_input(
    make_session: Any, make_profile: Any
) -> None:
    profile = make_profile("broken")
    CompactionProfile.objects.filter(pk=profile.pk).update(trigger_ratio=7)
    session = make_session(messages=[], profile=profile)
    with pytest.raises(InvalidInput) as info:
        policy_for(session)
    assert info.value.first.path == "trigger_ratio"
    assert isinstance(info.value.__cause__, PolicyError)


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


def test_anthropic_without_a_model_is_invalid_input(settings: Any, make_profile: Any) -> None:
    settings.CTXWEB_SUMMARY_MODEL = ""
    with pytest.raises(InvalidInput) as info:
        summarizer_for(make_profile(summarizer="anthropic"))
    error = info.value
    assert error.first.path == "summary_model"
    assert error.first.message == "the anthropic summarizer needs a summary model"


def test_an_api_compaction_through_the_anthropic_summarizer(
    settings: Any, make_session: Any, make_profile: Any, conversation: Any
) -> None:
    from sessions_app.services.compacting.session_compaction import compact_session
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
        # The model's text, then the state block the engine appends: the one the model
        # was shown in its prompt (docs/behaviour.md#what-a-summary-always-keeps).
        narrative, block = narrative_and_block(compaction.summary)
        assert narrative == "Goals and key decisions:\n- from the model"
        assert any(block in text for text in sent_texts(fake.requests[-1].body))
        assert len(fake.requests) >= 2  # the 529, then the answer (maybe a retention retry)
        assert {r.body["model"] for r in fake.requests} == {"claude-test"}
        assert "summary_retry" in [e["phase"] for e in compaction.details["events"]]


class KeywordSummarizer:
    """A custom summarizer (docs/summarizers.md): records the keywords it was given."""

    name = "keyword"

    def __init__(self, *, model: str | None = None, api_key: str | None = None) -> None:
        self.model = model
        self.api_key = api_key

    def summarize(self, request: SummaryRequest) -> str:
        return f"Summary by {self.model} of {len(request.messages)} messages"


class AnyKeywordSummarizer(KeywordSummarizer):
    """A custom summarizer taking **options: it is given every keyword."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = options


class NeedsEndpoint:
    """Not constructible from a configuration: it needs an argument none gives."""

    name = "needs-endpoint"

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def summarize(self, request: SummaryRequest) -> str:
        return ""


class NotASummarizerAfterAll:
    """Its `summarize` is not a method (any more): a broken plug-in."""

    name = "broken"
    summarize = None


class MakesSomethingElse:
    """Looks like a summarizer class, but constructing it gives something else."""

    name = "else"

    def __new__(cls, **options: Any) -> Any:
        return "not a summarizer"

    def summarize(self, request: SummaryRequest) -> str:
        return ""


def configured(make_profile: Any, **fields: Any) -> CompactionProfile:
    """A profile whose summarizer configuration `fast` has `fields`."""
    config = SummarizerConfig.objects.create(name="fast", **fields)
    profile: CompactionProfile = make_profile(
        "configured", summarizer="anthropic", summarizer_config=config
    )
    return profile


def test_an_extractive_config_wins_over_the_profile_choice(make_profile: Any) -> None:
    profile = configured(make_profile, provider="extractive")
    assert isinstance(summarizer_for(profile), ExtractiveSummarizer)
    assert summary_model(profile) == ""


def test_an_anthropic_config_reads_its_key_from_the_named_variable(
    settings: Any, make_profile: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.ANTHROPIC_API_KEY = "sk-from-settings"
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_TEAM", "sk-from-env")
    profile = configured(
        make_profile,
        provider="anthropic",
        model="claude-haiku",
        base_url="http://127.0.0.1:9/",
        api_key_env="CTXWEB_SUMMARY_KEY_TEAM",
        max_tokens=321,
        timeout_seconds=12.5,
    )
    summarizer = summarizer_for(profile)
    assert isinstance(summarizer, AnthropicSummarizer)
    assert (summarizer.model, summarizer.max_tokens, summarizer.timeout) == (
        "claude-haiku",
        321,
        12.5,
    )
    assert summarizer._client.api_key == "sk-from-env"
    assert str(summarizer._client.base_url).startswith("http://127.0.0.1:9")
    assert summary_model(profile) == "claude-haiku"


def test_an_anthropic_config_without_a_variable_keeps_the_settings_key(
    settings: Any, make_profile: Any
) -> None:
    settings.ANTHROPIC_API_KEY = "sk-from-settings"
    profile = configured(make_profile, provider="anthropic", model="claude-haiku")
    summarizer = summarizer_for(profile)
    assert isinstance(summarizer, AnthropicSummarizer)
    assert summarizer._client.api_key == "sk-from-settings"
    assert summarizer.max_tokens is None  # the request's cap: the profile's summary_max_tokens
    assert summarizer.timeout == profile.summary_timeout_seconds


def test_an_openai_config_builds_the_openai_summarizer(
    make_profile: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-must-not-be-used")
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_FAST", "sk-fast")
    profile = configured(
        make_profile,
        provider="openai",
        model="gpt-4o-mini",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="CTXWEB_SUMMARY_KEY_FAST",
    )
    summarizer = summarizer_for(profile)
    assert isinstance(summarizer, OpenAISummarizer)
    assert summarizer.model == "gpt-4o-mini"
    assert summarizer.base_url == "http://127.0.0.1:9/v1"
    assert summarizer._client.api_key == "sk-fast"


@pytest.mark.parametrize("value", [None, ""])
def test_a_named_variable_unset_at_run_time_is_unavailable_naming_it(
    make_profile: Any, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-must-not-be-used")
    if value is None:
        monkeypatch.delenv("CTXWEB_SUMMARY_KEY_FAST", raising=False)
    else:
        monkeypatch.setenv("CTXWEB_SUMMARY_KEY_FAST", value)
    profile = configured(
        make_profile, provider="openai", model="m", api_key_env="CTXWEB_SUMMARY_KEY_FAST"
    )
    with pytest.raises(Unavailable) as info:
        summarizer_for(profile)
    assert "CTXWEB_SUMMARY_KEY_FAST" in str(info.value)
    assert "'fast'" in str(info.value)


def test_a_custom_config_gets_the_keywords_its_class_accepts(
    make_profile: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_FAST", "k")
    path = f"{__name__}.KeywordSummarizer"
    profile = configured(
        make_profile,
        provider="custom",
        class_path=path,
        model="local",
        api_key_env="CTXWEB_SUMMARY_KEY_FAST",
    )
    summarizer = summarizer_for(profile)
    assert isinstance(summarizer, KeywordSummarizer)
    assert (summarizer.model, summarizer.api_key) == ("local", "k")
    config = SummarizerConfig.objects.get(name="fast")
    config.class_path = f"{__name__}.AnyKeywordSummarizer"
    config.max_tokens = 400
    config.save()
    profile.refresh_from_db()
    anything = summarizer_for(profile)
    assert isinstance(anything, AnyKeywordSummarizer)
    assert anything.options == {
        "model": "local",
        "base_url": None,
        "api_key": "k",
        "max_tokens": 400,
        "timeout": profile.summary_timeout_seconds,
    }


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("tests.sessions_app.no_such_module.Summarizer", "Cannot import"),
        (f"{__name__}.NeedsEndpoint", "constructor cannot be called"),
        (f"{__name__}.NotASummarizerAfterAll", "not a summarizer"),
        (f"{__name__}.MakesSomethingElse", "made a str, not a summarizer"),
    ],
)
def test_a_custom_class_that_stopped_working_is_unavailable(
    make_profile: Any, path: str, message: str
) -> None:
    # Saved without the admin's checks: the class may change after the admin accepted it.
    profile = configured(make_profile, provider="custom", class_path=path)
    with pytest.raises(Unavailable) as info:
        summarizer_for(profile)
    assert message in str(info.value)
    assert "'fast'" in str(info.value)


def test_a_missing_key_stops_a_compaction_before_anything_is_written(
    make_session: Any, make_profile: Any, conversation: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessions_app.services.compacting.session_compaction import compact_session

    monkeypatch.delenv("CTXWEB_SUMMARY_KEY_FAST", raising=False)
    profile = configured(
        make_profile, provider="openai", model="m", api_key_env="CTXWEB_SUMMARY_KEY_FAST"
    )
    session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    with pytest.raises(Unavailable, match="CTXWEB_SUMMARY_KEY_FAST"):
        compact_session(session)
    assert session.compactions.count() == 0


def test_a_compaction_through_an_openai_config_and_the_real_sdk(
    fake_openai: Any,
    make_session: Any,
    make_profile: Any,
    conversation: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sessions_app.services.compacting.session_compaction import compact_session
    from tests.support.fake_openai import ChatReply

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_FAST", "sk-fast-test")
    fake_openai.script(
        ChatReply.error(429, "slow down", kind="rate_limit_error"),
        ChatReply.text("Goals and key decisions:\n- from gpt-4o-mini"),
    )
    config = SummarizerConfig.objects.create(
        name="fast",
        provider="openai",
        model="gpt-4o-mini",
        base_url=fake_openai.base_url,
        api_key_env="CTXWEB_SUMMARY_KEY_FAST",
        max_tokens=600,
    )
    profile = make_profile(keep_recent_messages=4, steps=["summary"], summarizer_config=config)
    session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    compaction = compact_session(session).compaction
    assert compaction is not None
    assert compaction.status == "succeeded"
    assert (compaction.summarizer, compaction.model) == ("openai", "gpt-4o-mini")
    narrative, block = narrative_and_block(compaction.summary)
    assert narrative == "Goals and key decisions:\n- from gpt-4o-mini"
    assert any(block in text for text in sent_texts(fake_openai.requests[-1].body))
    assert compaction.details["summary_model"] == "gpt-4o-mini"
    assert len(fake_openai.requests) >= 2  # the 429, then the answer (maybe a retention retry)
    assert {r.api_key for r in fake_openai.requests} == {"sk-fast-test"}
    assert {r.body["model"] for r in fake_openai.requests} == {"gpt-4o-mini"}
    assert {r.body.get("max_tokens") for r in fake_openai.requests} == {600}
