"""Reading a body whose message array begins as an earlier body's did (proxy/digests.py): the
earlier elements are taken as they were decoded and hashed, and the result is what reading
the body afresh gives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from sessions_app.models import Compaction
from sessions_app.proxy import digests
from sessions_app.proxy.anthropic import AnthropicAdapter
from sessions_app.proxy.digests import Digests, decode_body, digest
from sessions_app.proxy.mapping import proxy_request
from sessions_app.services.proxying.prefix_map import ROOT, Incoming, chain
from sessions_app.services.proxying.turns import plan_request, record_answer
from sessions_app.services.sessions import overhead
from tests.sessions_app.proxy.conftest import small_default_profile

_ADAPTER = AnthropicAdapter()


@pytest.fixture(autouse=True)
def _forgotten() -> Iterator[None]:
    digests.clear_cache()
    yield
    digests.clear_cache()


def _afresh(body: bytes) -> tuple[Any, list[str] | None]:
    """`decode_body` with nothing read before."""
    digests.clear_cache()
    return decode_body(body)


def _body(messages: list[Any], **fields: Any) -> bytes:
    return json.dumps({"model": "m", **fields, "messages": messages}).encode()


def _history(count: int) -> list[Any]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} \u00e9"}
        for n in range(count)
    ]


def test_the_earlier_messages_are_taken_not_decoded_again() -> None:
    earlier, _ = decode_body(_body(_history(6)))
    later, hashes = decode_body(_body(_history(9), stream=True))
    assert all(a is b for a, b in zip(earlier["messages"], later["messages"][:6], strict=True))
    assert (later, hashes) == _afresh(_body(_history(9), stream=True))


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (b'{"messages":[{"a":1},{"b":2}]}', b'{"messages":[{"a":1},{"b":2}]}'),  # the same
        (b'{"messages":[{"a":1},{"b":2}]}', b'{"x":0,"messages":[{"a":1},{"b":2} ,\n{"c":3}]}'),
        (b'{"messages":[{"a":1},{"b":2}]}', b'{"messages":[{"a":1},{"b":22}]}'),  # differs
        (b'{"messages":[{"a":1},{"b":2}]}', b'{"messages":[{"a":1},{"b":2,"c":3}]}'),
        (b'{"messages":[{"a":"\\u00e9"}]}', '{"messages":[{"a":"\\u00e9"},{"\u00e9":1}]}'.encode()),
        (
            '{"messages":[{"a":"\u00e9"}]}'.encode(),
            '{"messages":[{"a":"\u00e9"},{"b":1}]}'.encode(),
        ),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1}]} '),
        (b'{"messages":[1,{"a":1}]}', b'{"messages":[1,{"a":1},2]}'),  # not all objects
    ],
)
def test_a_body_read_after_another_reads_as_afresh(earlier: bytes, later: bytes) -> None:
    decode_body(earlier)
    decoded, hashes = decode_body(later)
    assert decoded == json.loads(later)
    assert (decoded, hashes) == _afresh(later)


@pytest.mark.parametrize(
    "later",
    [b'{"messages":[{"a":1}{"b":2}]}', b'{"messages":[{"a":1},]}', b'{"messages":[{"a":1}'],
)
def test_a_broken_body_after_a_good_one_is_refused(later: bytes) -> None:
    decode_body(b'{"messages":[{"a":1}]}')
    with pytest.raises(ValueError):
        decode_body(later)


def test_kept_arrays_stay_within_their_budget() -> None:
    kept = digests._Recent(entries=2, chars=60)

    def keep(text: str, count: int) -> None:
        hashes = digests.RawDigests(["h"] * count)
        kept.keep(text, 0, len(text), json.loads(text + "]"), hashes, replacing=None)

    for text in ('[{"a":1}', '[{"b":22}', '[{"c":333}'):
        keep(text, 1)
    assert kept.longest('[{"a":1}]', 0) is None  # the least recently kept went first
    assert kept.longest('[{"c":333},{"d":4}]', 0) is not None
    big = "[" + "{}," * 30 + "{}"
    keep(big, 31)
    assert kept.longest(big + "]", 0) is None  # over the budget: not kept


@pytest.mark.django_db
def test_messages_handed_to_later_requests_come_back_unchanged(user: Any) -> None:
    """A conversation through planning, recording and a compaction: every request's
    messages, partly taken from the one before, equal the body decoded afresh (nothing the
    proxy does changes the messages it was handed)."""
    small_default_profile()
    call = {"type": "tool_use", "id": "toolu_0", "name": "Read", "input": {"path": "a.py"}}
    history: list[Any] = []
    turn = 0
    while turn < 3 or not Compaction.objects.filter(status="succeeded").exists():
        words = " ".join(f"word{turn}x{i}" for i in range(120))
        if turn % 2:
            block = {"type": "tool_result", "tool_use_id": f"toolu_{turn - 1}", "content": words}
            history.append({"role": "user", "content": [block], "cache_control": None})
        else:
            history.append({"role": "user", "content": f"turn {turn}: {words}"})
        body = _body(history, system="be brief")
        decoded, hashes = decode_body(body)
        assert decoded == json.loads(body)
        conversation = _ADAPTER.conversation(decoded)
        plan = plan_request(user, proxy_request(_ADAPTER, conversation, name="", raw=hashes))
        assert plan is not None
        content = (
            [{**call, "id": f"toolu_{turn}"}] if turn % 2 == 0 else [{"type": "text", "text": "ok"}]
        )
        message = {"role": "assistant", "content": content}
        stored = {**message, "usage": {"input_tokens": 10, "output_tokens": 2}}
        assert record_answer(plan.session_id, plan.stored, stored, digest(message))
        history.append(message)
        turn += 1
        assert turn < 30
    body = _body([*history, {"role": "user", "content": "done"}], system="be brief")
    assert decode_body(body) == _afresh(body)


def test_the_raw_chains_come_with_the_body_as_the_map_would_make_them() -> None:
    """The running fingerprints the map compares (services/proxying/prefix_map.py), made while the
    body is read, for a body read afresh and for one extending an earlier body."""
    for body in (_body(_history(5)), _body(_history(8))):  # the second extends the first
        _, hashes = decode_body(body)
        assert hashes is not None
        expected = [ROOT]
        for one in hashes:
            expected.append(chain(expected[-1], [one]))
        digested = Digests(json.loads(body)["messages"], hashes)
        assert list(digested.chains) == expected
        assert Incoming(digested).raw_chain(len(expected) - 1) == expected[-1]
        plain = Incoming(Digests(json.loads(body)["messages"], list(hashes)))
        assert [plain.raw_chain(p) for p in range(len(expected))] == expected


def test_an_unchanged_system_and_tools_are_the_same_objects_again() -> None:
    system = "You are careful. " * 100
    tools = [{"name": f"tool_{n}", "description": "Reads things. " * 20} for n in range(4)]
    first, _ = decode_body(_body(_history(2), system=system, tools=tools))
    again, _ = decode_body(_body(_history(4), tools=tools, system=system, stream=True))
    assert again["system"] is first["system"]
    assert again["tools"] is first["tools"]
    changed = [*tools, {"name": "tool_new", "description": "Writes things. " * 20}]
    other, _ = decode_body(_body(_history(4), system=system[:-1], tools=changed))
    assert other["system"] == system[:-1]
    assert other["tools"] == changed
    body = _body(_history(4), system=system, tools=tools[:1])
    assert decode_body(body) == _afresh(body)


def test_the_overhead_digest_is_remembered_for_the_same_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system, tools = "Be brief. " * 200, [{"name": "Read", "input_schema": {"type": "object"}}]
    made: list[Any] = []
    real = overhead.overhead_digest

    def counted(*args: Any) -> str:
        made.append(args)
        return real(*args)

    monkeypatch.setattr(overhead, "overhead_digest", counted)
    first = overhead.remembered_overhead_digest(system, tools)
    assert overhead.remembered_overhead_digest(system, tools) == first
    assert len(made) == 1
    copy = json.loads(json.dumps(tools))  # equal, not the same object: digested again
    assert overhead.remembered_overhead_digest(system, copy) == first
    assert len(made) == 2
    assert first == real(system, tools)
