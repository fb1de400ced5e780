"""Every error the proxy answers itself is in the provider's own format, never an HTML page
and never a 500 (issue 23 item 7): bodies nested too deeply to read, and chunked bodies
(no Content-Length) over CTXWEB_MAX_BODY_BYTES."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sessions_app.models import Session
from tests.support.asgi_server import AsgiServer
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = {"anthropic": "/proxy/anthropic/v1/messages", "openai": "/proxy/openai/v1/chat/completions"}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_message(depth: int) -> str:
    content = '[{"type": "text", "text": "hi", "x": ' + _nested(depth) + "}]"
    return (
        '{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": '
        + content
        + "}]}"
    )


def _deep_tool(depth: int) -> str:
    schema = '{"type": "object", "properties": {"a": ' + '{"items": ' * depth + "{}" + "}" * depth
    tool = '{"name": "t", "description": "d", "input_schema": ' + schema + "}}"
    return (
        '{"model": "m", "max_tokens": 5, "tools": [' + tool + "], "
        '"messages": [{"role": "user", "content": "hi"}]}'
    )


def _assert_error(provider: str, response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    if provider == "anthropic":
        assert body["type"] == "error"
        assert set(body["error"]) == {"type", "message"}
        return dict(body["error"])
    assert set(body) == {"error"}
    assert body["error"]["message"]
    return dict(body["error"])


@pytest.fixture
def upstreams(
    upstream_anthropic: StreamingAnthropic, upstream_openai: StreamingOpenAI
) -> dict[str, Any]:
    return {"anthropic": upstream_anthropic, "openai": upstream_openai}


def _post(proxy: AsgiServer, provider: str, key: str, content: Any) -> httpx.Response:
    return httpx.post(
        f"{proxy.url}{PATHS[provider]}",
        content=content,
        headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
        timeout=60,
    )


@pytest.mark.parametrize("provider", sorted(PATHS))
@pytest.mark.parametrize("body", [_deep_message(10_000), _deep_tool(1_000)], ids=["body", "tool"])
def test_a_body_nested_too_deeply_is_a_400_in_the_provider_format(
    proxy_server: AsgiServer, upstreams: dict[str, Any], ctx_key: str, provider: str, body: str
) -> None:
    if provider == "openai":
        body = body.replace('"input_schema"', '"parameters"')
    answered = _post(proxy_server, provider, ctx_key, body.encode())
    error = _assert_error(provider, answered, 400)
    assert "deeply" in error["message"]
    assert not upstreams[provider].requests
    assert not Session.objects.exists()


def _chunks(size: int) -> Iterator[bytes]:
    """A JSON body of about `size` bytes, sent chunked (no Content-Length)."""
    yield b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "'
    for _ in range(size // 65536 + 1):
        yield b"x" * 65536
    yield b'"}]}'


@pytest.mark.parametrize("provider", sorted(PATHS))
@pytest.mark.parametrize("over", ["limit", "django"])
def test_a_chunked_body_over_the_limit_is_a_413_in_the_provider_format(
    proxy_server: AsgiServer,
    upstreams: dict[str, Any],
    ctx_key: str,
    settings: Any,
    provider: str,
    over: str,
) -> None:
    """Over CTXWEB_MAX_BODY_BYTES only, and over Django's DATA_UPLOAD_MAX_MEMORY_SIZE too."""
    settings.CTXWEB_MAX_BODY_BYTES = 100_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 150_000 if over == "limit" else 100_000
    answered = _post(proxy_server, provider, ctx_key, _chunks(120_000))
    error = _assert_error(provider, answered, 413)
    assert "100000 bytes" in error["message"]
    assert not upstreams[provider].requests
