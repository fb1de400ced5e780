"""Proxy fixtures: streaming fake upstreams, ctxweb under uvicorn, SDK clients through it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from sessions_app.models import ApiKey, CompactionProfile
from tests.support.asgi_server import AsgiServer
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI


@pytest.fixture(scope="session")
def proxy_server() -> Iterator[AsgiServer]:
    """ctxweb served by uvicorn (ASGI) for the whole session."""
    with AsgiServer() as server:
        yield server


@pytest.fixture
def upstream_anthropic(settings: Any) -> Iterator[StreamingAnthropic]:
    """The fake Anthropic API the proxy forwards to, with the server's key configured."""
    with StreamingAnthropic() as server:
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = server.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = "sk-ant-server-key"
        yield server


@pytest.fixture
def upstream_openai(settings: Any) -> Iterator[StreamingOpenAI]:
    """The fake OpenAI API the proxy forwards to (base URL without /v1, as configured)."""
    with StreamingOpenAI() as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url.removesuffix("/v1")
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
        yield server


@pytest.fixture
def ctx_key(transactional_db: Any, user: Any) -> str:
    """A ctxweb API key of `user` (committed: the server thread must see it)."""
    _, key = ApiKey.issue(user, "proxy")
    return key


@pytest.fixture
def claude(proxy_server: AsgiServer, ctx_key: str) -> anthropic.Anthropic:
    """The Anthropic SDK pointed at the proxy, with a ctxweb key as its API key."""
    return anthropic.Anthropic(
        api_key=ctx_key, base_url=f"{proxy_server.url}/proxy/anthropic", max_retries=0
    )


@pytest.fixture
def gpt(proxy_server: AsgiServer, ctx_key: str) -> openai.OpenAI:
    """The OpenAI SDK pointed at the proxy, with a ctxweb key as its API key."""
    return openai.OpenAI(
        api_key=ctx_key, base_url=f"{proxy_server.url}/proxy/openai/v1", max_retries=0
    )


def small_default_profile() -> CompactionProfile:
    """Make the default profile a 3000-token window compacting at half, with extractive
    summaries (a short conversation through the proxy crosses it)."""
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(
        name="proxy-small",
        is_default=True,
        summarizer="extractive",
        context_limit=3000,
        trigger_ratio=0.5,
        keep_recent_messages=2,
        tail_retention_ratio=0.1,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )


@pytest.fixture(autouse=True)
def database_not_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test starts with the database paused by another (sessions_app/proxy/outage.py)."""
    from sessions_app.proxy import outage

    monkeypatch.setattr(outage, "_paused_until", 0.0)
