"""Through the proxy, the summarizer provider `upstream` writes a session's summaries with the
conversation's own upstream, key and model (issue 26 item 3; docs/summarizers.md): the real
Anthropic SDK as the agent, the proxy under uvicorn, the local fake as the upstream."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from sessions_app.models import Compaction, Session, SummarizerConfig
from tests.sessions_app.proxy.conftest import small_default_profile
from tests.support.asgi_server import AsgiServer
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)

OWN_KEY = "sk-ant-the-callers-own-0987"
#: The agent's own requests ask for this many tokens; a summary request asks for more.
AGENT_MAX_TOKENS = 20


def _words(turn: int) -> str:
    return " ".join(f"word{turn}x{i}" for i in range(120))


def _converse(client: anthropic.Anthropic, turns: int) -> None:
    history: list[Any] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"turn {turn}: {_words(turn)}"})
        reply = client.messages.create(
            model="claude-conversation", max_tokens=AGENT_MAX_TOKENS, messages=history
        )
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})


@pytest.mark.parametrize("own_key", [False, True], ids=["server-key", "callers-own-key"])
@pytest.mark.parametrize("chosen", ["configuration", "auto"])
def test_a_proxied_sessions_summaries_go_through_its_upstream_and_key(
    settings: Any,
    proxy_server: AsgiServer,
    ctx_key: str,
    upstream_anthropic: StreamingAnthropic,
    own_key: bool,
    chosen: str,
) -> None:
    """With a configuration of the provider `upstream`, or out of the box: the presets'
    choice `auto` with no Anthropic key and model in the settings."""
    settings.ANTHROPIC_API_KEY = ""
    profile = small_default_profile()
    if chosen == "auto":
        profile.summarizer = "auto"
    else:
        profile.summarizer_config = SummarizerConfig.objects.create(name="up", provider="upstream")
    profile.save()
    base_url = f"{proxy_server.url}/proxy/anthropic"
    if own_key:  # the caller's provider key goes upstream, its ctxweb key in X-Ctxweb-Key
        headers = {"X-Ctxweb-Key": ctx_key}
        client = anthropic.Anthropic(
            api_key=OWN_KEY, base_url=base_url, max_retries=0, default_headers=headers
        )
    else:
        client = anthropic.Anthropic(api_key=ctx_key, base_url=base_url, max_retries=0)
    _converse(client, 12)
    summaries = [r for r in upstream_anthropic.requests if r.body["max_tokens"] != AGENT_MAX_TOKENS]
    expected = OWN_KEY if own_key else "sk-ant-server-key"
    assert summaries, "no summary request reached the upstream"
    assert {r.api_key for r in summaries} == {expected}
    assert {r.body["model"] for r in summaries} == {"claude-conversation"}
    session = Session.objects.get()
    written = Compaction.objects.filter(session=session, status="succeeded").exclude(summary="")
    assert {(c.summarizer, c.model) for c in written} == {("anthropic", "claude-conversation")}
