"""The openai SDK's Responses API through the proxy (issue 25): forwarded as sent, stored once.

A local Responses server (tests/sessions_app/proxy/responses_fake.py) stands for OpenAI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from sessions_app.models import Message, Session
from tests.sessions_app.proxy.responses_fake import (
    FakeResponses,
    function_call,
    message,
    reasoning,
)

pytestmark = pytest.mark.django_db(transaction=True)

DEVELOPER: Any = {"type": "message", "role": "developer", "content": "Use the tools."}
ENCRYPTED = "ZmFrZS1lbmNyeXB0ZWQ=" * 5


@pytest.fixture
def upstream(settings: Any) -> Iterator[FakeResponses]:
    """The fake Responses API the proxy forwards to, with the server's key configured."""
    with FakeResponses() as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
        yield server


def _items(response: Any) -> list[dict[str, Any]]:
    """The output items as a client sends them back (the SDK's own dump)."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def _turns(gpt: openai.OpenAI, stream: bool, **extra: Any) -> list[Any]:
    """Two turns: a reasoning item and a call, then the call's output and the final text."""
    history: list[Any] = [DEVELOPER, {"role": "user", "content": "Run f, please."}]
    for turn in range(2):
        arguments: dict[str, Any] = {
            "model": "gpt-test",
            "input": history,
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "conversation-1",
            **extra,
        }
        if stream:
            with gpt.responses.stream(**arguments) as events:
                response = events.get_final_response()
        else:
            response = gpt.responses.create(**arguments)
        history = [*history, *_items(response)]
        if turn == 0:
            history.append({"type": "function_call_output", "call_id": "call_1", "output": "ok"})
    return history


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_round_trips_and_each_call_is_stored_once(
    gpt: openai.OpenAI, upstream: FakeResponses, stream: bool
) -> None:
    upstream.script(
        [reasoning("Planning", ENCRYPTED), function_call("f", {"x": 1}, "call_1")],
        [message("Done.")],
    )
    history = _turns(gpt, stream)
    sent = upstream.bodies()
    assert len(sent) == 2
    # everything the client sent reaches upstream as sent: ids, encrypted content, fields
    assert sent[1]["input"] == history[:-1]
    assert sent[1]["input"][2]["encrypted_content"] == ENCRYPTED
    assert sent[1]["input"][2]["id"] == "rs_1"
    assert sent[1]["store"] is False
    assert sent[1]["include"] == ["reasoning.encrypted_content"]
    assert upstream.requests[0].headers["authorization"] == "Bearer sk-openai-server-key"
    session = Session.objects.get()
    assert session.external_id == "conversation-1"
    assert session.title == "Run f, please."
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    kinds = [block["type"] for block in stored[1].content]
    assert kinds == ["thinking", "tool_use"]
    assert stored[1].content[0]["signature"] == ENCRYPTED
    assert stored[1].content[1]["id"] == "call_1"
    assert stored[2].content == [{"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}]
    assert stored[3].content == [{"type": "text", "text": "Done."}]
    uses = [b for m in stored for b in m.content if b.get("type") == "tool_use"]
    assert len(uses) == 1
    usage = stored[3].extra["usage"]
    assert usage["input_tokens"] == 120
    assert usage["cached_tokens"] == 100
    assert usage["reasoning_tokens"] == 10
    assert usage["total_tokens"] == 150


def test_unknown_fields_and_items_reach_upstream_unchanged(
    gpt: openai.OpenAI, upstream: FakeResponses
) -> None:
    odd_item: Any = {"type": "future_item", "id": "fi_1", "payload": {"a": [1, 2]}}
    tools: Any = [
        {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False},
        {"type": "web_search"},
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "g"}]},
    ]
    gpt.responses.create(
        model="gpt-test",
        input=[DEVELOPER, {"role": "user", "content": "Hi"}, odd_item],
        tools=tools,
        store=False,
        extra_body={"client_metadata": {"k": "v"}, "unknown_field": {"kept": True}},
    )
    body = upstream.bodies()[0]
    assert body["input"][2] == odd_item
    assert body["tools"] == tools
    assert body["client_metadata"] == {"k": "v"}
    assert body["unknown_field"] == {"kept": True}
    stored = list(Message.objects.order_by("seq"))
    assert "future_item" in stored[0].content[-1]["text"]
    # the developer message and the tools are the session's overhead, not messages
    overhead: Any = Session.objects.get().proxy_overhead
    assert overhead["system"] == [DEVELOPER]
    assert overhead["tools"] == tools


def test_own_key_mode_forwards_the_callers_key_and_never_the_ctxweb_key(
    proxy_server: Any, ctx_key: str, upstream: FakeResponses
) -> None:
    client = openai.OpenAI(
        api_key="sk-callers-own",
        base_url=f"{proxy_server.url}/proxy/openai/v1",
        default_headers={"X-Ctxweb-Key": ctx_key},
        max_retries=0,
    )
    client.responses.create(model="gpt-test", input="Hello")
    seen = upstream.requests[0]
    assert seen.headers["authorization"] == "Bearer sk-callers-own"
    assert all(ctx_key not in value for value in seen.headers.values())
    assert ctx_key.encode() not in seen.raw
    assert Session.objects.count() == 1


def test_server_key_mode_never_sends_the_ctxweb_key(
    gpt: openai.OpenAI, ctx_key: str, upstream: FakeResponses
) -> None:
    gpt.responses.create(model="gpt-test", input="Hello")
    seen = upstream.requests[0]
    assert all(ctx_key not in value for value in seen.headers.values())
    assert seen.headers["authorization"] == "Bearer sk-openai-server-key"


def test_a_wrong_key_is_refused_in_openais_format(
    proxy_server: Any, transactional_db: Any, upstream: FakeResponses
) -> None:
    client = openai.OpenAI(
        api_key="ctx_wrong", base_url=f"{proxy_server.url}/proxy/openai/v1", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as raised:
        client.responses.create(model="gpt-test", input="Hello")
    assert raised.value.status_code == 401
    assert upstream.requests == []


def test_models_are_forwarded(gpt: openai.OpenAI, upstream: FakeResponses) -> None:
    models = gpt.models.list()
    assert [m.id for m in models.data] == ["gpt-test"]
    assert upstream.requests[0].method == "GET"
    assert upstream.requests[0].headers["authorization"] == "Bearer sk-openai-server-key"


def test_previous_response_id_is_observed_in_the_session_of_that_response(
    gpt: openai.OpenAI, upstream: FakeResponses
) -> None:
    upstream.script([message("One.")], [message("Two.")], [message("Three.")])
    first = gpt.responses.create(model="gpt-test", input="Count", instructions="Be brief.")
    second = gpt.responses.create(
        model="gpt-test", input="Again", previous_response_id=first.id, instructions="Be brief."
    )
    third = gpt.responses.create(
        model="gpt-test",
        input=[{"role": "user", "content": "More"}],
        previous_response_id=second.id,
    )
    sent = upstream.bodies()
    assert sent[1]["input"] == "Again"  # forwarded as sent: the server holds the rest
    assert sent[1]["previous_response_id"] == first.id
    assert sent[2]["input"] == [{"role": "user", "content": "More"}]
    session = Session.objects.get()
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.role for m in stored] == ["user", "assistant"] * 3
    assert [m.original_id for m in stored if m.role == "assistant"] == [
        first.id,
        second.id,
        third.id,
    ]
    assert stored[4].content == [{"type": "text", "text": "More"}]
