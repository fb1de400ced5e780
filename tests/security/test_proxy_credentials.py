"""The proxy's credentials: a ctxweb key never goes upstream (issue 23 item 5), and failed
authentications are throttled on the proxy as on the REST API (issue 23 item 6).

Every combination of `x-api-key`, `Authorization` and `X-Ctxweb-Key`, each empty, a valid
ctxweb key, a provider key or a bad ctxweb key (a real key's prefix, a wrong secret), on
both providers: what the client gets and what upstream receives.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sessions_app.models import ApiKey
from tests.support.fake_server import FakeServer
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI

PATHS = {"anthropic": "/proxy/anthropic/v1/messages", "openai": "/proxy/openai/v1/chat/completions"}
SERVER_KEYS = {"anthropic": "sk-ant-server-key", "openai": "sk-openai-server-key"}
PROVIDER_KEY = "sk-callers-own-provider-key"
KINDS = ("empty", "valid", "provider", "bad")


@pytest.fixture
def upstreams(settings: Any) -> Iterator[dict[str, FakeServer]]:
    with StreamingAnthropic() as anthropic, StreamingOpenAI() as openai:
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = anthropic.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = SERVER_KEYS["anthropic"]
        settings.CTXWEB_UPSTREAM_OPENAI_URL = openai.base_url.removesuffix("/v1")
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = SERVER_KEYS["openai"]
        yield {"anthropic": anthropic, "openai": openai}


@pytest.fixture
def keys(db: Any) -> dict[str, str]:
    """A valid ctxweb key and a bad one with its prefix."""
    user = get_user_model().objects.create_user(username="proxied")
    _, valid = ApiKey.issue(user, "proxy")
    bad = f"ctx_{ApiKey.lookup_of(valid)}_not-the-secret"
    return {"empty": "", "valid": valid, "provider": PROVIDER_KEY, "bad": bad}


def _body(provider: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    return {**body, "max_tokens": 5} if provider == "anthropic" else body


def _post(provider: str, headers: dict[str, str]) -> Any:
    return Client().post(
        PATHS[provider], _body(provider), content_type="application/json", headers=headers
    )


def _expected(provider: str, sent: dict[str, str]) -> tuple[int, dict[str, str]]:
    """The status and upstream credentials the README's rules give (written apart from
    proxy/auth.py): the ctxweb key is X-Ctxweb-Key, else a ctx_ value of x-api-key or the
    Bearer token; the caller's own provider headers go upstream, else the server's key."""
    x_api_key = sent.get("x-api-key", "")
    bearer = sent.get("authorization", "").removeprefix("Bearer ")
    candidates = [value for value in (x_api_key, bearer) if value]
    shaped = [value for value in candidates if value.startswith("ctx_")]
    key = sent.get("x-ctxweb-key") or next(iter(shaped or candidates), "")
    if key != sent["__valid"]:
        return 401, {}
    own = {
        name: value
        for name, value in (("x-api-key", x_api_key), ("authorization", sent.get("authorization")))
        if value and not (bearer if name == "authorization" else value).startswith("ctx_")
    }
    if own:
        return 200, own
    if provider == "anthropic":
        return 200, {"x-api-key": SERVER_KEYS[provider]}
    return 200, {"authorization": f"Bearer {SERVER_KEYS[provider]}"}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_no_combination_of_headers_sends_a_ctxweb_key_upstream(
    provider: str, keys: dict[str, str], upstreams: dict[str, FakeServer], settings: Any
) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 10_000  # the matrix fails on purpose many times
    upstream = upstreams[provider]
    for x_kind, auth_kind, ctx_kind in itertools.product(KINDS, repeat=3):
        sent = {
            "x-api-key": keys[x_kind],
            "authorization": f"Bearer {keys[auth_kind]}" if keys[auth_kind] else "",
            "x-ctxweb-key": keys[ctx_kind],
        }
        case = f"x-api-key={x_kind} authorization={auth_kind} x-ctxweb-key={ctx_kind}"
        before = len(upstream.requests)
        status, credentials = _expected(provider, {**sent, "__valid": keys["valid"]})

        response = _post(provider, sent)

        assert response.status_code == status, case
        received = upstream.requests[before:]
        assert len(received) == (1 if status == 200 else 0), case
        for request in received:
            assert not any("ctx_" in value for value in request.headers.values()), case
            got = {name: request.headers.get(name) for name in ("x-api-key", "authorization")}
            assert {k: v for k, v in got.items() if v} == credentials, case


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_bad_keys_on_the_proxy_are_throttled_and_a_valid_key_passes(
    provider: str, keys: dict[str, str], upstreams: dict[str, FakeServer], settings: Any
) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 20
    statuses = [_post(provider, {"x-api-key": keys["bad"]}) for _ in range(60)]

    assert [r.status_code for r in statuses] == [401] * 20 + [429] * 40
    throttled = statuses[-1]
    assert int(throttled["Retry-After"]) > 0
    body = throttled.json()
    if provider == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
    else:
        assert body["error"]["code"] == "rate_limit_error"
    assert "too many failed authentication" in throttled.content.decode()
    assert upstreams[provider].requests == [], "nothing refused went upstream"
    assert _post(provider, {"x-api-key": keys["valid"]}).status_code == 200


def test_failures_on_the_rest_api_and_both_proxies_share_one_count(
    keys: dict[str, str], upstreams: dict[str, FakeServer], settings: Any
) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 9
    rest = Client(headers={"authorization": f"Bearer {keys['bad']}"})
    for _ in range(3):
        assert rest.get("/api/sessions").status_code == 401
        assert _post("anthropic", {"x-api-key": keys["bad"]}).status_code == 401
        assert _post("openai", {"authorization": f"Bearer {keys['bad']}"}).status_code == 401

    assert _post("openai", {"authorization": f"Bearer {keys['bad']}"}).status_code == 429
    assert _post("anthropic", {"x-api-key": keys["bad"]}).status_code == 429
    assert rest.get("/api/sessions").status_code == 429
    assert _post("anthropic", {"x-api-key": keys["valid"]}).status_code == 200
