"""The summarizer provider `upstream` (issue 26 item 3; docs/summarizers.md#the-upstream-provider):
a proxied session's summaries go through its conversation's upstream and key, with the
profile's model or the conversation's, through the real SDKs against the local fakes; where no
upstream can write them, the profile's other configuration does; no key is ever written down.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from compaction import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    OpenAISummarizer,
    SummaryRequest,
)
from sessions_app.models import Compaction, CompactionJob, Session, SummarizerConfig
from sessions_app.services.background.jobs import enqueue_compaction, run_job
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.proxying.summaries import ConversationUpstream, summaries_through
from sessions_app.services.sessions.policies import summarizer_for, summary_model
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.fake_openai import ChatReply, FakeOpenAI

pytestmark = pytest.mark.django_db

SERVER_KEY = "sk-ant-server-key-0123"
CALLER_KEY = "sk-ant-caller-own-key-4567"
SUMMARY = "Goals and key decisions:\n- written by the conversation's model"


@pytest.fixture(autouse=True)
def _configured_upstreams(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No fake summarizer, no key in the environment an SDK could pick up instead."""
    settings.CTXWEB_SUMMARIZER_CLASS = ""
    settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = ""
    settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = ""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def upstream_profile(make_profile: Any) -> Any:
    config = SummarizerConfig.objects.create(name="conversation", provider="upstream")
    return make_profile(
        "through-upstream", keep_recent_messages=4, steps=["summary"], summarizer_config=config
    )


def proxied(make_session: Any, conversation: Any, profile: Any, provider: str) -> Session:
    """A session as the proxy stores one: its conversation key, provider and model."""
    model = "claude-conversation" if provider == "anthropic" else "gpt-conversation"
    session: Session = make_session(
        messages=conversation(12),
        context_limit=3000,
        profile=profile,
        source_format=provider,
        model=model,
    )
    state = {"provider": provider, "offset": 0}
    Session.objects.filter(pk=session.pk).update(proxy_key="cc:test", proxy_state=state)
    session.refresh_from_db()
    return session


def stored_text() -> str:
    """Every stored row that a key could have leaked into, as one text."""
    rows = [
        *Compaction.objects.values(),
        *CompactionJob.objects.values(),
        *Session.objects.values(),
        *SummarizerConfig.objects.values(),
    ]
    return json.dumps(rows, default=str)


def test_in_a_proxy_request_the_callers_own_key_and_the_conversations_model_write_it(
    settings: Any,
    upstream_profile: Any,
    make_session: Any,
    conversation: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = proxied(make_session, conversation, upstream_profile, "anthropic")
    caplog.set_level(logging.DEBUG)
    with FakeAnthropic() as fake:
        fake.script(Reply.text(SUMMARY))
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = fake.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = SERVER_KEY
        upstream = ConversationUpstream("anthropic", "claude-request", {"x-api-key": CALLER_KEY})
        with summaries_through(upstream):
            compaction = compact_session(session).compaction
    assert compaction is not None
    assert compaction.status == "succeeded"
    assert (compaction.summarizer, compaction.model) == ("anthropic", "claude-request")
    assert "written by the conversation's model" in compaction.summary
    assert {r.api_key for r in fake.requests} == {CALLER_KEY}
    assert {r.body["model"] for r in fake.requests} == {"claude-request"}
    assert CALLER_KEY not in stored_text()
    assert CALLER_KEY not in caplog.text
    assert CALLER_KEY not in repr(upstream)


def test_the_profile_names_the_model_and_an_openai_conversation_goes_to_openai(
    settings: Any, make_profile: Any, make_session: Any, conversation: Any
) -> None:
    config = SummarizerConfig.objects.create(
        name="small", provider="upstream", model="gpt-small", max_tokens=500
    )
    profile = make_profile(keep_recent_messages=4, steps=["summary"], summarizer_config=config)
    session = proxied(make_session, conversation, profile, "openai")
    with FakeOpenAI() as fake:
        fake.script(ChatReply.text(SUMMARY))
        settings.CTXWEB_UPSTREAM_OPENAI_URL = fake.base_url.removesuffix("/v1")
        upstream = ConversationUpstream("openai", "gpt-big", {"authorization": "Bearer sk-own"})
        with summaries_through(upstream):
            compaction = compact_session(session).compaction
    assert compaction is not None
    assert compaction.status == "succeeded"
    assert (compaction.summarizer, compaction.model) == ("openai", "gpt-small")
    assert {r.api_key for r in fake.requests} == {"sk-own"}
    assert {r.body["model"] for r in fake.requests} == {"gpt-small"}
    assert {r.body.get("max_tokens") for r in fake.requests} == {500}
    assert summary_model(profile) == "gpt-small"


def test_an_oauth_login_is_sent_as_the_same_bearer_token(
    settings: Any, upstream_profile: Any
) -> None:
    with FakeAnthropic() as fake:
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = fake.base_url
        upstream = ConversationUpstream(
            "anthropic", "claude-request", {"authorization": "Bearer sk-ant-oat-login"}
        )
        with summaries_through(upstream):
            summarizer = summarizer_for(upstream_profile)
        assert isinstance(summarizer, AnthropicSummarizer)
        summarizer.summarize(SummaryRequest(messages=[{"role": "user", "content": "hi"}]))
    sent = fake.requests[0]
    assert sent.headers["authorization"] == "Bearer sk-ant-oat-login"
    assert "x-api-key" not in sent.headers


def test_a_background_job_uses_the_servers_key_never_a_callers(
    settings: Any, upstream_profile: Any, make_session: Any, conversation: Any
) -> None:
    session = proxied(make_session, conversation, upstream_profile, "anthropic")
    with FakeAnthropic() as fake:
        fake.script(Reply.text(SUMMARY))
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = fake.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = SERVER_KEY
        job = enqueue_compaction(session, params={"trigger": "manual"})
        run = run_job(str(job.pk))
    assert run.status == "succeeded", run
    compaction = Compaction.objects.get(session=session)
    assert (compaction.summarizer, compaction.model) == ("anthropic", "claude-conversation")
    assert compaction.details["summary_model"] == "claude-conversation"
    assert {r.api_key for r in fake.requests} == {SERVER_KEY}
    assert {r.body["model"] for r in fake.requests} == {"claude-conversation"}
    assert SERVER_KEY not in stored_text()


def test_without_the_servers_key_outside_a_request_the_profiles_choice_writes_it(
    upstream_profile: Any, make_session: Any, conversation: Any
) -> None:
    session = proxied(make_session, conversation, upstream_profile, "anthropic")
    assert isinstance(summarizer_for(upstream_profile, session), ExtractiveSummarizer)
    compaction = compact_session(session).compaction
    assert compaction is not None
    assert compaction.summarizer == "extractive"


def test_a_session_the_proxy_did_not_store_falls_back_even_with_a_server_key(
    settings: Any, upstream_profile: Any, make_session: Any, conversation: Any
) -> None:
    settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = SERVER_KEY
    session = make_session(messages=conversation(4), profile=upstream_profile)
    assert isinstance(summarizer_for(upstream_profile, session), ExtractiveSummarizer)
    assert isinstance(summarizer_for(upstream_profile), ExtractiveSummarizer)


def test_the_server_key_reaches_openai_sessions_too(
    settings: Any, upstream_profile: Any, make_session: Any, conversation: Any
) -> None:
    settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server"
    session = proxied(make_session, conversation, upstream_profile, "openai")
    summarizer = summarizer_for(upstream_profile, session)
    assert isinstance(summarizer, OpenAISummarizer)
    assert summarizer.model == "gpt-conversation"


def test_a_responses_session_is_summarized_through_openai(
    settings: Any, upstream_profile: Any, make_session: Any, conversation: Any
) -> None:
    settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server"
    session = proxied(make_session, conversation, upstream_profile, "openai")
    Session.objects.filter(pk=session.pk).update(proxy_state={"provider": "responses", "offset": 0})
    session.refresh_from_db()
    summarizer = summarizer_for(upstream_profile, session)
    assert isinstance(summarizer, OpenAISummarizer)
    assert summarizer.model == "gpt-conversation"


def test_no_model_at_all_falls_back(upstream_profile: Any) -> None:
    with summaries_through(ConversationUpstream("anthropic", "", {"x-api-key": CALLER_KEY})):
        assert isinstance(summarizer_for(upstream_profile), ExtractiveSummarizer)


def test_the_credentials_are_forgotten_after_the_request(upstream_profile: Any) -> None:
    with summaries_through(ConversationUpstream("anthropic", "m", {"x-api-key": CALLER_KEY})):
        assert isinstance(summarizer_for(upstream_profile), AnthropicSummarizer)
    assert isinstance(summarizer_for(upstream_profile), ExtractiveSummarizer)


@pytest.mark.parametrize(
    ("field", "value"),
    [("base_url", "https://elsewhere.example"), ("api_key_env", "CTXWEB_SUMMARY_KEY_X")],
)
def test_an_upstream_configuration_has_no_address_or_key_of_its_own(field: str, value: str) -> None:
    config = SummarizerConfig(name="up", provider="upstream", **{field: value})
    with pytest.raises(ValidationError) as refused:
        config.full_clean()
    assert field in refused.value.message_dict
    assert "upstream" in refused.value.message_dict[field][0]


def test_an_upstream_configuration_needs_no_model() -> None:
    SummarizerConfig(name="up", provider="upstream").full_clean()  # no error
