"""Requests and answers of one conversation that lose a race with another request: stored
all the same, never dropped (docs/behaviour.md, "Concurrent requests of one conversation").
tests/deploy/test_proxy_races.py runs the races for real, under gunicorn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.models import Message, Session
from sessions_app.proxy.anthropic import AnthropicAdapter
from sessions_app.proxy.digests import decode_body, digest
from sessions_app.proxy.mapping import proxy_request
from sessions_app.services.proxying import turns as proxying
from sessions_app.services.proxying.turns import (
    ProxyPlan,
    ProxyRequest,
    plan_request,
    record_answer,
)

pytestmark = pytest.mark.django_db

_ADAPTER = AnthropicAdapter()


def _request(messages: list[Any]) -> ProxyRequest:
    """The service's view of a request, read from its bytes as the view reads it."""
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": messages}).encode()
    decoded, hashes = decode_body(body)
    return proxy_request(_ADAPTER, _ADAPTER.conversation(decoded), name="", raw=hashes)


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _record(plan: ProxyPlan | None, text: str) -> bool:
    """Record the answer `text` to `plan`'s request, as the proxy's recorder does."""
    assert plan is not None
    message = _said(text)
    usage = {"input_tokens": 10, "output_tokens": 2}
    return record_answer(
        plan.session_id,
        plan.stored,
        {**message, "usage": usage},
        digest(message),
        profile=plan.profile,
        request=plan.request,
    )


def _contents(session_id: Any) -> list[Any]:
    rows = Message.objects.filter(session_id=session_id).order_by("seq")
    return [row.content for row in rows]


def _first_turn(user: Any) -> tuple[list[Any], ProxyPlan]:
    history: list[Any] = [{"role": "user", "content": "start"}]
    plan = plan_request(user, _request(history))
    assert plan is not None
    assert _record(plan, "started")
    return [*history, _said("started")], plan


def test_a_request_that_keeps_losing_its_session_is_stored_as_its_own(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each time it is looked for, the request finds the session another request of the
    # conversation moved on: it was forwarded unrecorded after the second time.
    history, first = _first_turn(user)
    monkeypatch.setattr(proxying, "_matching", lambda *args: first.session_id)
    fork = [history[0], _said("started otherwise"), {"role": "user", "content": "go on"}]
    plan = plan_request(user, _request(fork))
    assert plan is not None
    assert plan.session_id != first.session_id
    assert _contents(plan.session_id) == ["start", _said("started otherwise")["content"], "go on"]
    assert _contents(first.session_id) == ["start", _said("started")["content"]]


def test_an_answer_whose_session_moved_on_is_stored_with_its_request(user: Any) -> None:
    # Two clients send the same request; the first's answer is stored and its next request
    # too before the second's (different) answer comes back: that answer went nowhere.
    history, first = _first_turn(user)
    asked = [*history, {"role": "user", "content": "next"}]
    mine, theirs = plan_request(user, _request(asked)), plan_request(user, _request(asked))
    assert _record(mine, "one answer")
    assert plan_request(
        user, _request([*asked, _said("one answer"), {"role": "user", "content": "more"}])
    )
    assert _record(theirs, "another answer")
    branches = Session.objects.exclude(pk=first.session_id)
    assert branches.count() == 1
    branch = branches.get()
    assert _contents(branch.pk) == [
        *_contents(first.session_id)[:3],
        _said("another answer")["content"],
    ]
    later = plan_request(
        user, _request([*asked, _said("another answer"), {"role": "user", "content": "so?"}])
    )
    assert later is not None
    assert later.session_id == branch.pk  # the client that got it goes on there
    assert _contents(branch.pk)[-1] == "so?"


def test_an_answer_the_moved_on_session_holds_already_is_not_stored_again(user: Any) -> None:
    history, first = _first_turn(user)
    asked = [*history, {"role": "user", "content": "next"}]
    mine, theirs = plan_request(user, _request(asked)), plan_request(user, _request(asked))
    assert _record(mine, "the answer")
    assert plan_request(
        user, _request([*asked, _said("the answer"), {"role": "user", "content": "more"}])
    )
    assert _record(theirs, "the answer")
    assert Session.objects.count() == 1
    assert len(_contents(first.session_id)) == 5
