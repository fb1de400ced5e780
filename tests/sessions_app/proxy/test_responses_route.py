"""The Responses route's own steps (issue 25): websocket upgrade, compressed bodies, Codex's
request kinds (prewarm, both kinds of compaction), failures passed through."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard
from django.urls import reverse

from sessions_app.models import Compaction, ContextEntry, Message, Session
from tests.sessions_app.proxy.responses_fake import Failure, FakeResponses, message

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "019a2215-379e-7243-9785-85db1bfa1f01"
DEVELOPER: Any = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "Be a coding agent."}],
}


@pytest.fixture
def upstream(settings: Any) -> Iterator[FakeResponses]:
    with FakeResponses() as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
        yield server


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _codex(kind: str = "turn", window: int = 0) -> dict[str, str]:
    """Codex's headers for a request of `kind`."""
    metadata = {"session_id": SESSION, "request_kind": kind, "window_number": window}
    return {
        "session-id": SESSION,
        "x-codex-window-id": f"{SESSION}:{window}",
        "x-codex-turn-metadata": json.dumps(metadata),
    }


def _post(
    proxy_server: Any,
    key: str,
    body: Any,
    *,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
) -> httpx.Response:
    sent = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    data = content if content is not None else json.dumps(body).encode()
    return httpx.post(
        f"{proxy_server.url}/proxy/openai/v1/responses",
        content=data,
        headers={**sent, **(headers or {})},
        timeout=20,
    )


def _body(items: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-test",
        "input": items,
        "stream": True,
        "store": False,
        "prompt_cache_key": SESSION,
        **extra,
    }


def test_a_websocket_upgrade_is_answered_426_at_once(
    proxy_server: Any, upstream: FakeResponses
) -> None:
    answer = httpx.get(
        f"{proxy_server.url}/proxy/openai/v1/responses",
        headers={
            "connection": "Upgrade",
            "upgrade": "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
        timeout=5,
    )
    assert answer.status_code == 426
    assert upstream.requests == []


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_compressed_bodies_are_read_and_forwarded_decompressed(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses, encoding: str
) -> None:
    body = _body([DEVELOPER, _user("Compressed hello")], stream=False)
    raw = json.dumps(body).encode()
    packed = gzip.compress(raw) if encoding == "gzip" else zstandard.ZstdCompressor().compress(raw)
    answer = _post(
        proxy_server, ctx_key, None, content=packed, headers={"content-encoding": encoding}
    )
    assert answer.status_code == 200, answer.text
    seen = upstream.requests[0]
    assert seen.raw == raw
    assert "content-encoding" not in seen.headers
    assert Session.objects.get().title == "Compressed hello"


_PACKED = json.dumps(_body([_user("cut short " * 50)])).encode()


@pytest.mark.parametrize(
    ("encoding", "content"),
    [
        ("zstd", b"not zstd at all"),
        ("zstd", zstandard.ZstdCompressor().compress(_PACKED)[:-5]),
        ("gzip", gzip.compress(_PACKED)[:-12]),
        ("br", _PACKED),
    ],
)
def test_a_bad_compressed_body_is_refused_in_openais_format(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses, encoding: str, content: bytes
) -> None:
    answer = _post(
        proxy_server, ctx_key, None, content=content, headers={"content-encoding": encoding}
    )
    assert answer.status_code == (415 if encoding == "br" else 400)
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert encoding in answer.json()["error"]["message"]
    assert upstream.requests == []


def test_a_body_over_the_limit_once_decompressed_is_413(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses, settings: Any
) -> None:
    settings.CTXWEB_MAX_BODY_BYTES = 50_000
    raw = json.dumps(_body([_user("x" * 200_000)])).encode()
    packed = gzip.compress(raw)
    assert len(packed) < 50_000
    answer = _post(
        proxy_server, ctx_key, None, content=packed, headers={"content-encoding": "gzip"}
    )
    assert answer.status_code == 413
    assert "error" in answer.json()
    assert upstream.requests == []


def test_a_prewarm_is_forwarded_and_not_stored(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses
) -> None:
    answer = _post(
        proxy_server, ctx_key, _body([DEVELOPER, _user("warm")]), headers=_codex("prewarm")
    )
    assert answer.status_code == 200
    assert len(upstream.requests) == 1
    assert Session.objects.count() == 0


def test_a_failed_response_passes_through_as_sent(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses, caplog: Any
) -> None:
    upstream.script(Failure())
    answer = _post(proxy_server, ctx_key, _body([DEVELOPER, _user("too long")]), headers=_codex())
    assert answer.status_code == 200
    assert "response.failed" in answer.text
    assert "context_length_exceeded" in answer.text
    session = Session.objects.get()
    assert [m.role for m in Message.objects.filter(session=session)] == ["user"]
    assert "context_length_exceeded" in caplog.text  # the failure is logged


def _two_turns(proxy_server: Any, key: str, upstream: FakeResponses) -> list[Any]:
    """Two Codex turns; the history as the client holds it after them."""
    history: list[Any] = [
        DEVELOPER,
        _user("<environment_context>cwd</environment_context>"),
        _user("First task"),
    ]
    for text in ("one", "two"):
        upstream.script([message(f"Answer {text}", item_id=f"msg_{text}")])
        answer = _post(proxy_server, key, _body(history), headers=_codex())
        assert answer.status_code == 200
        history = [
            *history,
            message(f"Answer {text}", item_id=f"msg_{text}"),
            _user(f"Next after {text}"),
        ]
    return history


@pytest.mark.parametrize("said", [True, False])
def test_codex_custom_provider_compaction_is_a_compaction_point(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses, said: bool
) -> None:
    history = _two_turns(proxy_server, ctx_key, upstream)
    session = Session.objects.get()
    assert Message.objects.filter(session=session).count() == 4
    upstream.script([message("Checkpoint: the user asked for two things.", item_id="msg_sum")])
    checkpoint = _user("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff.")
    kind = _codex("compaction") if said else {"session-id": SESSION}  # said, or seen
    answer = _post(proxy_server, ctx_key, _body([*history, checkpoint], tools=[]), headers=kind)
    assert answer.status_code == 200
    assert "Checkpoint" in answer.text
    point = Compaction.objects.get(session=session)
    assert point.trigger == Compaction.Trigger.IMPORTED
    assert point.summary == "Checkpoint: the user asked for two things."
    assert Message.objects.filter(session=session).count() == 4  # the request is no turn
    # the next window: Codex's own history around its summary, in the same session
    window = [
        DEVELOPER,
        _user("First task"),
        _user("Summary: Checkpoint: the user asked for two things."),
        _user("Go on"),
    ]
    answer = _post(proxy_server, ctx_key, _body(window), headers=_codex("turn", window=1))
    assert answer.status_code == 200
    assert Session.objects.count() == 1
    assert upstream.bodies()[-1]["input"] == window  # forwarded as sent: the client's summary
    assert Message.objects.filter(session=session).count() == 6


def test_codex_builtin_compaction_is_an_opaque_compaction_point(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses
) -> None:
    history = _two_turns(proxy_server, ctx_key, upstream)
    session = Session.objects.get()
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENCRYPTED-SUMMARY" * 4}
    upstream.script([item])
    trigger = {"type": "compaction_trigger"}
    answer = _post(proxy_server, ctx_key, _body([*history, trigger]))  # no turn metadata
    assert answer.status_code == 200
    point = Compaction.objects.get(session=session)
    assert "opaque" in point.summary
    assert point.details["source"]["opaque"] is True
    assert point.details["source"]["client"] is True
    assert point.details["source"]["block"] == item  # the encrypted summary is kept
    summary = ContextEntry.objects.get(session=session, kind=ContextEntry.Kind.SUMMARY)
    assert summary.compaction_id == point.pk
    window = [DEVELOPER, _user("First task"), item, _user("Go on")]
    answer = _post(proxy_server, ctx_key, _body(window), headers=_codex("turn", window=1))
    assert answer.status_code == 200
    assert Session.objects.count() == 1
    assert upstream.bodies()[-1]["input"] == window


def test_the_history_page_says_a_client_compaction_is_opaque(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses, client: Any, user: Any
) -> None:
    history = _two_turns(proxy_server, ctx_key, upstream)
    upstream.script([{"type": "compaction", "id": "cmp_1", "encrypted_content": "X" * 40}])
    _post(proxy_server, ctx_key, _body([*history, {"type": "compaction_trigger"}]))
    session = Session.objects.get()
    client.force_login(user)
    answer = client.get(
        reverse("ui:tab", args=[session.pk, "history"]), headers={"HX-Request": "true"}
    )
    assert answer.status_code == 200
    page = answer.content.decode()
    assert "opaque summary (encrypted by the provider)" in page
    assert "made by the client" in page
