"""The system prompt and tools of a proxied session: written and counted only when they
change; the profile read once per request (plan and record)."""

from __future__ import annotations

import hashlib
import importlib
import json
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Session
from sessions_app.proxy.anthropic import AnthropicAdapter
from sessions_app.proxy.digests import decode_body, digest
from sessions_app.proxy.mapping import proxy_request
from sessions_app.services.proxying import overhead as proxy_overhead
from sessions_app.services.proxying.turns import (
    ProxyPlan,
    ProxyRequest,
    plan_request,
    record_answer,
)
from sessions_app.services.sessions import overhead

pytestmark = pytest.mark.django_db

_ADAPTER = AnthropicAdapter()
TOOLS = [{"name": "read", "description": "Read a file. " * 30, "input_schema": {"type": "object"}}]
SYSTEM = "You are a careful agent. " * 30


def _request(messages: list[Any], **extra: Any) -> ProxyRequest:
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": messages, **extra}).encode()
    decoded, hashes = decode_body(body)
    return proxy_request(_ADAPTER, _ADAPTER.conversation(decoded), name="s", raw=hashes)


def _answer(plan: ProxyPlan | None, text: str) -> dict[str, Any]:
    assert plan is not None
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    usage = {"input_tokens": 10, "output_tokens": 2}
    stored = {**message, "usage": usage}
    assert record_answer(
        plan.session_id, plan.stored, stored, digest(message), profile=plan.profile
    )
    return message


def _first_turn(user: Any) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": "hi"}]
    plan = plan_request(user, _request(history, system=SYSTEM, tools=TOOLS))
    return [*history, _answer(plan, "hello"), {"role": "user", "content": "more"}]


def _overhead_writes(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in captured if q["sql"].startswith("UPDATE") and "proxy_overhead" in q["sql"]
    ]


def test_an_unchanged_system_and_tools_are_neither_written_nor_counted(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = _first_turn(user)
    before = Session.objects.get()
    assert before.proxy_overhead == {"system": SYSTEM, "tools": TOOLS}

    def not_again(*args: Any, **kwargs: Any) -> dict[str, int]:
        raise AssertionError("counted again")

    monkeypatch.setattr(proxy_overhead, "overhead_counts", not_again)
    with CaptureQueriesContext(connection) as captured:
        plan = plan_request(user, _request(history, system=SYSTEM, tools=TOOLS))
    assert plan is not None
    assert _overhead_writes(captured) == []
    after = Session.objects.get()
    assert after.message_count == 3
    assert after.proxy_overhead == before.proxy_overhead
    state, old = after.proxy_state or {}, before.proxy_state or {}
    for key in ("system_tokens", "tools_tokens", "overhead_digest"):
        assert state[key] == old[key]


def test_a_changed_system_is_written_and_recounted(user: Any) -> None:
    history = _first_turn(user)
    counted = (Session.objects.get().proxy_state or {})["system_tokens"]
    with CaptureQueriesContext(connection) as captured:
        plan_request(user, _request(history, system="short", tools=TOOLS))
    assert len(_overhead_writes(captured)) == 1
    session = Session.objects.get()
    assert session.proxy_overhead == {"system": "short", "tools": TOOLS}
    state = session.proxy_state or {}
    assert state["system_tokens"] == 1 < counted
    assert state["tools_tokens"] == overhead.overhead_counts(None, TOOLS)["tools_tokens"]


def test_a_request_without_tools_keeps_the_stored_ones(user: Any) -> None:
    history = _first_turn(user)
    tools_tokens = (Session.objects.get().proxy_state or {})["tools_tokens"]
    plan_request(user, _request(history, system="short"))
    session = Session.objects.get()
    assert session.proxy_overhead == {"system": "short", "tools": TOOLS}
    assert (session.proxy_state or {})["tools_tokens"] == tools_tokens
    assert (session.proxy_state or {})["system_tokens"] == 1


def test_a_state_that_kept_them_inline_moves_them_out(user: Any) -> None:
    history = _first_turn(user)
    session = Session.objects.get()
    state = {**(session.proxy_state or {}), "system": SYSTEM, "tools": TOOLS}
    Session.objects.filter(pk=session.pk).update(proxy_state=state, proxy_overhead=None)
    plan_request(user, _request(history))
    session.refresh_from_db()
    assert session.proxy_overhead == {"system": SYSTEM, "tools": TOOLS}
    assert "system" not in (session.proxy_state or {})
    assert "tools" not in (session.proxy_state or {})


def test_the_default_profile_is_read_once_per_request(user: Any) -> None:
    history = _first_turn(user)
    with CaptureQueriesContext(connection) as captured:
        plan = plan_request(user, _request(history, system=SYSTEM, tools=TOOLS))
        _answer(plan, "done")
    profile_reads = [
        q["sql"] for q in captured if 'FROM "sessions_app_compactionprofile"' in q["sql"]
    ]
    assert len(profile_reads) == 1
    assert Session.objects.get().message_count == 4


@pytest.mark.parametrize("ascii_only", [True, False])
def test_a_message_raw_digest_is_the_hash_of_its_bytes_as_sent(ascii_only: bool) -> None:
    messages = [{"role": "user", "content": "café ☕"}, {"role": "assistant", "content": "ok"}]
    compact: dict[str, Any] = {"separators": (",", ":"), "ensure_ascii": ascii_only}
    body = json.dumps({"model": "m", "messages": messages}, **compact).encode()
    decoded, hashes = decode_body(body)
    assert decoded["messages"] == messages
    sent = [json.dumps(message, **compact).encode() for message in messages]
    assert hashes == [hashlib.sha256(one).hexdigest()[:16] for one in sent]


def test_the_migration_moves_system_and_tools_out_of_the_state(user: Any) -> None:
    migration = importlib.import_module("sessions_app.migrations.0010_proxy_overhead")
    _first_turn(user)
    session = Session.objects.get()
    inline = {**(session.proxy_state or {}), "system": SYSTEM, "tools": TOOLS}
    Session.objects.filter(pk=session.pk).update(proxy_state=inline, proxy_overhead=None)
    migration._move(apps, None)
    session.refresh_from_db()
    assert session.proxy_overhead == {"system": SYSTEM, "tools": TOOLS}
    assert session.proxy_state == {k: v for k, v in inline.items() if k not in ("system", "tools")}
    migration._back(apps, None)
    session.refresh_from_db()
    assert session.proxy_state == inline
