"""One conversation is one session however the client re-serializes its history between
requests (issue 23 item 1): the Anthropic SDK through the proxy replays an agent run whose
re-sent history varies as Claude Code's does (docs/behaviour.md#canonical-form)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import pytest

from sessions_app.canonical import FORM, legacy_digest
from sessions_app.models import Message, Session
from sessions_app.proxy.digests import legacy_conversation_key
from sessions_app.proxy.mapping import MAX_NAME
from tests.support.asgi_server import AsgiServer
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)

Body = dict[str, Any]
EPHEMERAL = {"type": "ephemeral"}
WRITE = {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"path": "a.py"}}
EDIT = {"type": "tool_use", "id": "toolu_2", "name": "Edit", "input": {"old": "a", "new": "b"}}
NUDGE = "The user hasn't heard from you in a while."
ANSWERS = [[WRITE], [EDIT], [{"type": "text", "text": "Done."}], [{"type": "text", "text": "Bye."}]]


def _turns() -> list[list[Body]]:
    """What the client adds before each request (after the previous answer)."""
    return [
        [{"role": "user", "content": "Write a.py then fix it."}],
        [{"role": "user", "content": [_result("toolu_1", "created")]}],
        [
            {"role": "user", "content": [_result("toolu_2", "edited")]},
            {"role": "system", "content": NUDGE},
        ],
        [{"role": "user", "content": "Thanks."}],
    ]


def _result(tool_id: str, text: str) -> Body:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def _string_or_block(history: list[Body], turn: int) -> list[Body]:
    """Every string content as one text block on odd turns (messages, tool results and the
    mid-conversation system message alike), as sent on even ones."""
    if turn % 2 == 0:
        return history

    def blocks(value: Any) -> Any:
        return [{"type": "text", "text": value}] if isinstance(value, str) else value

    out = copy.deepcopy(history)
    for message in out:
        message["content"] = blocks(message["content"])
        for block in message["content"]:
            if block.get("type") == "tool_result":
                block["content"] = blocks(block["content"])
    return out


def _cache_control_moved(history: list[Body], turn: int) -> list[Body]:
    """The breakpoint on the last tool result's (nested) text block, nowhere else: it moves
    to a later tool result as the run goes on."""
    out = copy.deepcopy(history)
    results = [b for m in out for b in m["content"] if isinstance(b, dict) and "tool_use_id" in b]
    if results:
        inner = results[-1]["content"]
        text = inner if isinstance(inner, str) else inner[0]["text"]
        results[-1]["content"] = [{"type": "text", "text": text, "cache_control": EPHEMERAL}]
    return out


def _client_markers(history: list[Body], turn: int) -> list[Body]:
    """Claude Code's own additions: a tool's default filled into the input it sends back
    (`replace_all: false`), `is_error: false` on results, keys in another order."""
    out = []
    for message in copy.deepcopy(history):
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                block["input"] = {"replace_all": False, **block["input"]}
            if block.get("type") == "tool_result":
                block["is_error"] = False
        out.append(dict(reversed(message.items())))
    return out


VARIATIONS: dict[str, Callable[[list[Body], int], list[Body]]] = {
    "string_or_block": _string_or_block,
    "cache_control_moved": _cache_control_moved,
    "client_markers": _client_markers,
    "all": lambda h, t: _client_markers(_cache_control_moved(_string_or_block(h, t), t), t),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("variation", sorted(VARIATIONS))
def test_a_reserialized_history_continues_the_same_session(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    variation: str,
    stream: bool,
) -> None:
    history: list[Body] = []
    for turn, (added, answer) in enumerate(zip(_turns(), ANSWERS, strict=True)):
        upstream_anthropic.enqueue(Reply.blocks(answer, stop_reason="tool_use"))
        history += added
        sent: Any = VARIATIONS[variation](history, turn)
        reply: Any
        if stream:
            with claude.messages.stream(model="m", max_tokens=50, messages=sent) as s:
                reply = s.get_final_message()
        else:
            reply = claude.messages.create(model="m", max_tokens=50, messages=sent)
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})

    [session] = Session.objects.all()
    assert session.title.endswith("(continued)") is False
    assert session.message_count == len(history) == 9
    assert len(upstream_anthropic.requests) == 4


def _raw_turn(proxy: AsgiServer, key: str, body: Body, **headers: str) -> httpx.Response:
    """One request with the body's bytes as written (JSON escapes kept)."""
    return httpx.post(
        f"{proxy.url}/proxy/anthropic/v1/messages",
        content=json.dumps(body).encode("ascii"),  # ensure_ascii: "\ud800" stays an escape
        headers={"x-api-key": key, "content-type": "application/json", **headers},
        timeout=30,
    )


@pytest.mark.parametrize("bad", ["\ud800", "\x00"])
@pytest.mark.parametrize("turn", [0, 1])
def test_a_nul_or_lone_surrogate_is_stored_cleaned_and_recording_goes_on(
    proxy_server: AsgiServer,
    upstream_anthropic: StreamingAnthropic,
    ctx_key: str,
    bad: str,
    turn: int,
) -> None:
    """Issue 23 item 3: every turn is stored (cleaned as imports clean it), and the upstream
    gets the client's bytes unchanged."""
    history: list[Body] = []
    for n in range(5):
        upstream_anthropic.enqueue(Reply.text(f"answer {n}"))
        text = f"turn {n}{bad}end" if n == turn else f"turn {n}"
        history.append({"role": "user", "content": text})
        body = {"model": "m", "max_tokens": 20, "messages": history}
        answered = _raw_turn(proxy_server, ctx_key, body)
        assert answered.status_code == 200, answered.text
        assert upstream_anthropic.requests[-1].body == body  # as the client sent it
        history.append({"role": "assistant", "content": answered.json()["content"]})

    [session] = Session.objects.all()
    stored = [m.as_dict() for m in Message.objects.filter(session=session).order_by("seq")]
    assert len(stored) == 10
    cleaned = "\ufffd" if bad == "\ud800" else ""
    assert stored[2 * turn]["content"] == f"turn {turn}{cleaned}end"
    assert [m["role"] for m in stored] == ["user", "assistant"] * 5


def test_a_session_name_too_long_is_refused_in_the_provider_format(
    proxy_server: AsgiServer, upstream_anthropic: StreamingAnthropic, ctx_key: str
) -> None:
    """Issue 23 item 4: a name that cannot be kept whole is refused before anything is
    stored or sent; one that fits keeps a 3-turn conversation in one session."""
    long_name, fits = "n" * (MAX_NAME + 1), "n" * MAX_NAME
    body = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
    refused = _raw_turn(proxy_server, ctx_key, body, **{"X-Ctxweb-Session": long_name})
    assert refused.status_code == 400
    error = refused.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert "X-Ctxweb-Session" in error["error"]["message"]
    assert not Session.objects.exists()
    assert not upstream_anthropic.requests
    history: list[Body] = []
    for n in range(3):
        upstream_anthropic.enqueue(Reply.text(f"answer {n}"))
        history.append({"role": "user", "content": f"turn {n}"})
        body = {"model": "m", "max_tokens": 20, "messages": history}
        answered = _raw_turn(proxy_server, ctx_key, body, **{"X-Ctxweb-Session": fits})
        assert answered.status_code == 200, answered.text
        history.append({"role": "assistant", "content": answered.json()["content"]})
    [session] = Session.objects.all()
    assert session.message_count == 6


def test_an_answer_with_a_nul_is_recorded_cleaned(
    proxy_server: AsgiServer, upstream_anthropic: StreamingAnthropic, ctx_key: str
) -> None:
    """The model's answer is stored when it comes (with its usage), cleaned; the client's
    next request, which sends it back as it came, continues the session."""
    history: list[Body] = []
    for n, text in enumerate(["ans\x00wer \ud800", "second"]):
        upstream_anthropic.enqueue(Reply.text(text))
        history.append({"role": "user", "content": f"turn {n}"})
        answered = _raw_turn(
            proxy_server, ctx_key, {"model": "m", "max_tokens": 9, "messages": history}
        )
        assert answered.status_code == 200, answered.text
        history.append({"role": "assistant", "content": answered.json()["content"]})
    [session] = Session.objects.all()
    stored = [m.as_dict() for m in Message.objects.filter(session=session).order_by("seq")]
    assert [m["role"] for m in stored] == ["user", "assistant"] * 2
    assert stored[1]["content"] == [{"type": "text", "text": "answer \ufffd"}]
    assert "usage" in stored[1]  # recorded from the upstream's answer, not the next request


def test_a_session_stored_before_the_canonical_form_is_continued(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    """Its key (system prompt and first message, digested the old way) and its map (digests
    of form 1) still find it; the map is then re-digested in the current form."""
    first: Any = {"role": "user", "content": "turn 0"}
    upstream_anthropic.enqueue(Reply.text("answer 0"), Reply.text("answer 1"))
    reply = claude.messages.create(model="m", max_tokens=9, system="be brief", messages=[first])
    answer = {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
    session = Session.objects.get()
    old_key = legacy_conversation_key("anthropic", "be brief", first)
    assert old_key != session.proxy_key
    state: Any = dict(session.proxy_state or {})
    kept = {k: v for k, v in state["map"].items() if k != "form"}
    kept.update(digests=[legacy_digest(first), legacy_digest(answer)], raws=["", "", ""])
    Session.objects.filter(pk=session.pk).update(
        proxy_key=old_key, proxy_state={**state, "map": kept}
    )

    history: Any = [first, answer, {"role": "user", "content": "turn 1"}]
    claude.messages.create(model="m", max_tokens=9, system="be brief", messages=history)

    [again] = Session.objects.all()
    assert again.pk == session.pk
    assert again.message_count == 4
    assert (again.proxy_state or {})["map"]["form"] == FORM
