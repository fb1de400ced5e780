"""The presets' summarizer choice `auto` for a proxied session (issue 26 item 3: real model
summaries out of the box; docs/summarizers.md#without-a-configuration): written through the
conversation's own upstream, the extractive summary where none can write it or once it fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from compaction import ExtractiveSummarizer, SummaryRequest
from sessions_app.models import Compaction
from sessions_app.services.background.jobs import enqueue_compaction, run_job
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.proxying.summaries import (
    ConversationUpstream,
    OrExtractive,
    summaries_through,
)
from sessions_app.services.sessions.policies import summarizer_for
from tests.sessions_app.services.test_upstream_summaries import (  # noqa: F401 (an autouse fixture)
    CALLER_KEY,
    SERVER_KEY,
    SUMMARY,
    _configured_upstreams,
    proxied,
    stored_text,
)
from tests.support.fake_anthropic import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_summary_key(settings: Any) -> None:
    """`auto` with no Anthropic key or model of the settings' (and, as in the tests of the
    provider `upstream`, no fake summarizer and no key an SDK could pick up)."""
    settings.ANTHROPIC_API_KEY = ""
    settings.CTXWEB_SUMMARY_MODEL = ""


@pytest.fixture
def auto_profile(make_profile: Any) -> Any:
    return make_profile("auto", summarizer="auto", keep_recent_messages=4, steps=["summary"])


def _in_request(session: Any, fake: FakeAnthropic, settings: Any) -> Compaction | None:
    settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = fake.base_url
    upstream = ConversationUpstream("anthropic", "claude-request", {"x-api-key": CALLER_KEY})
    with summaries_through(upstream):
        return compact_session(session).compaction


def test_in_a_proxy_request_the_conversations_model_and_key_write_the_summary(
    settings: Any, auto_profile: Any, make_session: Any, conversation: Any
) -> None:
    session = proxied(make_session, conversation, auto_profile, "anthropic")
    with FakeAnthropic() as fake:
        fake.script(Reply.text(SUMMARY))
        compaction = _in_request(session, fake, settings)
    assert compaction is not None
    assert compaction.status == "succeeded"
    assert (compaction.summarizer, compaction.model) == ("anthropic", "claude-request")
    assert "written by the conversation's model" in compaction.summary
    assert {r.api_key for r in fake.requests} == {CALLER_KEY}
    assert CALLER_KEY not in stored_text()


def test_the_profiles_summary_model_is_asked_instead(
    settings: Any, make_profile: Any, make_session: Any, conversation: Any
) -> None:
    profile = make_profile(
        summarizer="auto", summary_model="claude-small", keep_recent_messages=4, steps=["summary"]
    )
    session = proxied(make_session, conversation, profile, "anthropic")
    with FakeAnthropic() as fake:
        fake.script(Reply.text(SUMMARY))
        compaction = _in_request(session, fake, settings)
    assert compaction is not None
    assert compaction.model == "claude-small"
    assert {r.body["model"] for r in fake.requests} == {"claude-small"}


@pytest.mark.parametrize(
    "refusal",
    [
        Reply.error(401, "authentication_error", "This credential is only authorized for X"),
        Reply.error(400, "invalid_request_error", "model not found"),
        Reply.refusal(),
    ],
    ids=["login token refused", "bad request", "refusal"],
)
def test_a_failing_upstream_gives_way_to_the_extractive_summary(
    settings: Any, auto_profile: Any, make_session: Any, conversation: Any, refusal: Reply
) -> None:
    session = proxied(make_session, conversation, auto_profile, "anthropic")
    with FakeAnthropic(default=refusal) as fake:
        compaction = _in_request(session, fake, settings)
    assert compaction is not None
    assert compaction.status == "succeeded"
    assert (compaction.summarizer, compaction.model) == ("extractive", "")
    assert len(fake.requests) == 1  # not asked again within the compaction


def test_without_an_upstream_to_write_it_auto_is_extractive(
    settings: Any, auto_profile: Any, make_session: Any, conversation: Any
) -> None:
    session = proxied(make_session, conversation, auto_profile, "anthropic")
    # Outside a request with no server key...
    assert isinstance(summarizer_for(auto_profile, session), ExtractiveSummarizer)
    assert compact_session(session).compaction.summarizer == "extractive"  # type: ignore[union-attr]
    # ...and a session the proxy did not store, even with one.
    settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = SERVER_KEY
    stored = make_session(messages=conversation(12), context_limit=3000, profile=auto_profile)
    assert isinstance(summarizer_for(auto_profile, stored), ExtractiveSummarizer)


def test_a_background_job_writes_it_with_the_servers_key(
    settings: Any, auto_profile: Any, make_session: Any, conversation: Any
) -> None:
    session = proxied(make_session, conversation, auto_profile, "anthropic")
    with FakeAnthropic() as fake:
        fake.script(Reply.text(SUMMARY))
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = fake.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = SERVER_KEY
        run = run_job(str(enqueue_compaction(session, params={"trigger": "manual"}).pk))
    assert run.status == "succeeded", run
    compaction = Compaction.objects.get(session=session)
    assert (compaction.summarizer, compaction.model) == ("anthropic", "claude-conversation")
    assert {r.api_key for r in fake.requests} == {SERVER_KEY}


def test_an_anthropic_key_and_model_of_the_settings_come_first(
    settings: Any, auto_profile: Any, make_session: Any, conversation: Any
) -> None:
    session = proxied(make_session, conversation, auto_profile, "anthropic")
    settings.ANTHROPIC_API_KEY = "sk-ant-settings"
    settings.CTXWEB_SUMMARY_MODEL = "claude-settings"
    upstream = ConversationUpstream("anthropic", "claude-request", {"x-api-key": CALLER_KEY})
    with summaries_through(upstream):
        chosen = summarizer_for(auto_profile, session)
    assert not isinstance(chosen, OrExtractive)
    assert getattr(chosen, "model", "") == "claude-settings"


def test_or_extractive_names_what_wrote_the_summary() -> None:
    class Failing:
        name = "anthropic"
        model = "claude-x"

        def summarize(self, request: SummaryRequest) -> str:
            from compaction import SummaryError

            raise SummaryError("api_error", "refused", status=403)

    chosen = OrExtractive(Failing())
    assert (chosen.name, chosen.model) == ("anthropic", "claude-x")
    text = chosen.summarize(SummaryRequest(messages=[{"role": "user", "content": "fix the bug"}]))
    assert "fix the bug" in text
    assert (chosen.name, chosen.model) == ("extractive", "")
