"""What a proxied request writes: one UPDATE of the session row per transaction, and the
context's last message taken from what the proxy appended last instead of read again, but
only while nothing else changed the session."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Message, Session
from sessions_app.proxy.anthropic import AnthropicAdapter
from sessions_app.proxy.digests import decode_body, digest
from sessions_app.proxy.mapping import proxy_request
from sessions_app.services.errors import InvalidInput
from sessions_app.services.proxying.turns import (
    ProxyPlan,
    ProxyRequest,
    plan_request,
    record_answer,
)
from sessions_app.services.sessions.lifecycle import append_messages

pytestmark = pytest.mark.django_db

_ADAPTER = AnthropicAdapter()
_CALL = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}


def _request(messages: list[Any]) -> ProxyRequest:
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": messages}).encode()
    decoded, hashes = decode_body(body)
    return proxy_request(_ADAPTER, _ADAPTER.conversation(decoded), name="", raw=hashes)


def _answer(plan: ProxyPlan | None, content: list[Any]) -> dict[str, Any]:
    assert plan is not None
    message = {"role": "assistant", "content": content}
    stored = {**message, "usage": {"input_tokens": 10, "output_tokens": 2}}
    assert record_answer(
        plan.session_id, plan.stored, stored, digest(message), profile=plan.profile
    )
    return message


def _result(tool_use_id: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": "x = 1"}
    return {"role": "user", "content": [block]}


def _tool_call_turn(user: Any) -> list[Any]:
    """A first turn whose stored answer calls a tool."""
    history: list[Any] = [{"role": "user", "content": "read a.py"}]
    plan = plan_request(user, _request(history))
    return [*history, _answer(plan, [_CALL])]


def _writes(captured: CaptureQueriesContext, table: str) -> list[str]:
    return [q["sql"] for q in captured if q["sql"].startswith(f'UPDATE "{table}"')]


def _reads(captured: CaptureQueriesContext, table: str) -> list[str]:
    return [
        q["sql"]
        for q in captured
        if q["sql"].startswith("SELECT") and f'FROM "{table}"' in q["sql"]
    ]


def test_each_step_writes_the_session_row_once_and_reads_no_entry(user: Any) -> None:
    history = _tool_call_turn(user)
    with CaptureQueriesContext(connection) as planning:
        plan = plan_request(user, _request([*history, _result("toolu_1")]))
    with CaptureQueriesContext(connection) as answering:
        _answer(plan, [{"type": "text", "text": "done"}])
    for captured in (planning, answering):
        assert len(_writes(captured, "sessions_app_session")) == 1
        assert _reads(captured, "sessions_app_contextentry") == []
    session = Session.objects.get()
    assert session.message_count == 4
    assert session.version == 4  # one new version per append, as append_messages makes
    rows = Message.objects.filter(session=session).order_by("seq")
    assert [row.role for row in rows] == ["user", "assistant", "user", "assistant"]


def test_tool_results_are_checked_against_the_tool_call_appended_last(user: Any) -> None:
    history = _tool_call_turn(user)
    with pytest.raises(InvalidInput, match="answers no tool_use"):
        plan_request(user, _request([*history, _result("toolu_other")]))
    assert Session.objects.get().message_count == 2


def test_a_message_appended_around_the_proxy_is_read_as_the_last_one(user: Any) -> None:
    """An assistant tool call appended through the API after the proxy's last append:
    the proxy's next append must answer it (its own memory of the last message is stale)."""
    history: list[Any] = [{"role": "user", "content": "hello"}]
    plan = plan_request(user, _request(history))
    history.append(_answer(plan, [{"type": "text", "text": "hi"}]))
    session = Session.objects.get()
    append_messages(session, [{"role": "user", "content": "from the API"}])
    append_messages(session, [{"role": "assistant", "content": [_CALL]}])
    with pytest.raises(InvalidInput, match="has no tool_result"):
        plan_request(user, _request([*history, {"role": "user", "content": "go on"}]))
    assert Session.objects.get().message_count == 4
