"""Which session a request maps to, at the service level: edited histories, names, requests
of one conversation overlapping, long histories, sessions mapped in the first format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.models import Compaction, CompactionProfile, Message, Session
from sessions_app.proxy.anthropic import AnthropicAdapter
from sessions_app.proxy.digests import decode_body, digest
from sessions_app.proxy.mapping import proxy_request
from sessions_app.services.proxying import context as proxy_context
from sessions_app.services.proxying import turns as proxying
from sessions_app.services.proxying.prefix_map import WINDOW
from sessions_app.services.proxying.turns import (
    ProxyPlan,
    ProxyRequest,
    plan_request,
    record_answer,
)
from tests.sessions_app.proxy.conftest import small_default_profile

pytestmark = pytest.mark.django_db

_ADAPTER = AnthropicAdapter()


def _request(messages: list[Any], name: str = "") -> ProxyRequest:
    """The service's view of a request, read from its bytes as the view reads it."""
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": messages}).encode()
    decoded, hashes = decode_body(body)
    conversation = _ADAPTER.conversation(decoded)
    return proxy_request(_ADAPTER, conversation, name=name, raw=hashes)


def _answer(plan: ProxyPlan | None, text: str) -> dict[str, Any]:
    assert plan is not None
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    usage = {"input_tokens": 10, "output_tokens": 2}
    assert record_answer(plan.session_id, plan.stored, {**message, "usage": usage}, digest(message))
    return message


def _contents(session_id: Any) -> list[Any]:
    rows = Message.objects.filter(session_id=session_id).order_by("seq")
    return [row.content for row in rows]


def _talk(user: Any, turns: int, name: str = "") -> tuple[list[Any], ProxyPlan]:
    history: list[Any] = []
    plan = None
    for turn in range(turns):
        history.append({"role": "user", "content": f"step {turn}"})
        plan = plan_request(user, _request(history, name))
        history.append(_answer(plan, f"done {turn}"))
    assert plan is not None
    return history, plan


def test_a_long_conversation_stays_in_one_session(user: Any) -> None:
    history, plan = _talk(user, WINDOW * 2)
    assert Session.objects.count() == 1
    assert Session.objects.get().message_count == len(history)
    assert plan.stored == len(history) - 1


def test_an_edited_message_before_the_window_starts_a_new_session(user: Any) -> None:
    history, plan = _talk(user, WINDOW)
    edited = [dict(m) for m in history]
    edited[2] = {"role": "user", "content": "step 1, said otherwise"}
    fork = plan_request(user, _request([*edited, {"role": "user", "content": "go on"}]))
    assert fork is not None
    assert fork.session_id != plan.session_id
    old = Session.objects.get(pk=plan.session_id)
    assert old.message_count == len(history)  # untouched
    assert _contents(old.pk)[2] == "step 1"
    assert Session.objects.get(pk=fork.session_id).message_count == len(edited) + 1


def test_history_sent_in_other_bytes_continues(user: Any) -> None:
    """Every stored message but the first (which keys the conversation) re-serialized
    (string contents as text blocks): same session, nothing appended twice."""
    history, plan = _talk(user, WINDOW)
    blocks = [
        {**m, "content": [{"type": "text", "text": m["content"]}]}
        if isinstance(m["content"], str) and index
        else m
        for index, m in enumerate(history)
    ]
    again = plan_request(user, _request([*blocks, {"role": "user", "content": "more"}]))
    assert again is not None
    assert again.session_id == plan.session_id
    assert Session.objects.get().message_count == len(history) + 1


def test_same_prefix_under_two_names_makes_two_sessions(user: Any) -> None:
    history, first = _talk(user, 2, name="alpha")
    _, second = _talk(user, 2, name="beta")
    assert first.session_id != second.session_id
    assert Session.objects.get(pk=first.session_id).external_id == "alpha"
    assert Session.objects.get(pk=second.session_id).external_id == "beta"
    # Each name goes on in its own session.
    more = [*history, {"role": "user", "content": "and alpha goes on"}]
    for name, plan in (("alpha", first), ("beta", second)):
        again = plan_request(user, _request(more, name))
        assert again is not None
        assert again.session_id == plan.session_id
    assert Session.objects.count() == 2
    assert [s.message_count for s in Session.objects.order_by("external_id")] == [5, 5]


def test_the_same_request_twice_in_flight(user: Any) -> None:
    """A client retries before its first answer came: the messages are stored once, the
    second answer is an alias of the first, and the conversation goes on in one session."""
    question = [{"role": "user", "content": "hello"}]
    one = plan_request(user, _request(question))
    two = plan_request(user, _request(question))
    assert one is not None
    assert two is not None
    assert one.session_id == two.session_id
    _answer(one, "first")
    second = _answer(two, "second")
    assert _contents(one.session_id) == ["hello", [{"type": "text", "text": "first"}]]
    after = plan_request(user, _request([*question, second, {"role": "user", "content": "next"}]))
    assert after is not None
    assert after.session_id == one.session_id
    assert Session.objects.get().message_count == 3


def test_two_different_requests_in_flight_do_not_mix(user: Any) -> None:
    history, plan = _talk(user, 2)
    left = plan_request(user, _request([*history, {"role": "user", "content": "left"}]))
    right = plan_request(user, _request([*history, {"role": "user", "content": "right"}]))
    assert left is not None
    assert right is not None
    assert left.session_id == plan.session_id
    assert right.session_id != plan.session_id
    _answer(left, "to the left")
    _answer(right, "to the right")
    assert _contents(left.session_id)[-2:] == ["left", [{"type": "text", "text": "to the left"}]]
    assert _contents(right.session_id)[-2:] == ["right", [{"type": "text", "text": "to the right"}]]


def test_a_session_moved_on_under_the_request_is_mapped_again(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between finding its session and locking it, another request of the conversation
    appended a different message: the request starts its own session, not a failure."""
    history, plan = _talk(user, 2)
    real = proxying._matching
    raced: list[ProxyPlan | None] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        if not raced:
            raced.append(None)
            raced[0] = plan_request(user, _request([*history, {"role": "user", "content": "b"}]))
        return found

    monkeypatch.setattr(proxying, "_matching", racing)
    late = plan_request(user, _request([*history, {"role": "user", "content": "a"}]))
    assert late is not None
    assert raced[0] is not None
    assert raced[0].session_id == plan.session_id
    assert late.session_id != plan.session_id
    assert _contents(plan.session_id)[-1] == "b"
    assert _contents(late.session_id)[-1] == "a"


def test_a_session_mapped_in_the_first_format_continues(user: Any) -> None:
    history, plan = _talk(user, 3)
    session = Session.objects.get()
    state = dict(session.proxy_state or {})
    del state["map"]
    state.update(digests=[digest(m) for m in history], starts=list(range(6)), answered=5)
    Session.objects.filter(pk=session.pk).update(proxy_state=state)
    again = plan_request(user, _request([*history, {"role": "user", "content": "more"}]))
    assert again is not None
    assert again.session_id == plan.session_id
    state = Session.objects.get().proxy_state or {}
    assert state["map"]["count"] == 7
    assert state["map"]["stored"] == 7
    assert "digests" not in state
    assert "starts" not in state
    assert Session.objects.get().message_count == 7


def test_the_rewritten_head_is_the_same_bytes_until_the_next_compaction(user: Any) -> None:
    profile = small_default_profile()
    history: list[Any] = []
    plan = None
    turn = 0
    while not Compaction.objects.filter(status="succeeded").exists():
        words = " ".join(f"word{turn}x{i}" for i in range(120))
        history.append({"role": "user", "content": f"turn {turn}: {words}"})
        plan = plan_request(user, _request(history))
        history.append(_answer(plan, f"answer {turn}"))
        turn += 1
        assert turn < 20
    CompactionProfile.objects.filter(pk=profile.pk).update(context_limit=1_000_000)
    heads = []
    for extra in ("one more", "and another"):
        history.append({"role": "user", "content": extra})
        plan = plan_request(user, _request(history))
        assert plan is not None
        assert plan.head is not None
        assert 0 < plan.tail_start <= len(history) - 1
        heads.append(json.dumps(plan.head))
        history.append(_answer(plan, "ok"))
        proxy_context.clear_cache()  # the second head is rendered again, not reused
    assert heads[0] == heads[1]
    assert "[ctxweb summary of earlier conversation]" in heads[0]
