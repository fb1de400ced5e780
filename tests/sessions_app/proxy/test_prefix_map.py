"""The constant-size map of a proxied session's stored client messages
(services/proxying/prefix_map.py)
and the raw digests taken from a request's bytes (proxy/digests.py `decode_body`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.proxy.digests import Digests, decode_body, digest
from sessions_app.services.proxying.prefix_map import WINDOW, Incoming, PrefixMap


def _incoming(messages: list[Any], *, indent: int | None = None) -> Incoming:
    """The request's messages as the proxy reads them from the bytes a client sent."""
    body = json.dumps({"model": "m", "messages": messages}, indent=indent).encode()
    decoded, hashes = decode_body(body)
    return Incoming(Digests(decoded["messages"], hashes))


def _history(count: int) -> list[Any]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"}
        for n in range(count)
    ]


def _stored(messages: list[Any]) -> PrefixMap:
    prefix = PrefixMap()
    prefix.add_starts(range(len(messages)))
    prefix.extend(_incoming(messages))
    return prefix


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b' { "model" : "m" , "messages" : [ {"role":"user","content":"hi"} , {"a":[1,2]} ] } ',
        b'{"messages":[]}',
        b"[1, 2]",
        b'{"messages":{"not":"a list"}}',
        b'{"messages":[{"role":"user"}],"messages":[{"role":"assistant"}]}',
        '{"m":"\u00e9","messages":[{"content":"\u00e9\\u00e9 \\ud83d\\ude00"}]}'.encode(),
    ],
)
def test_decode_body_decodes_as_json_loads(body: bytes) -> None:
    decoded, hashes = decode_body(body)
    assert decoded == json.loads(body)
    messages = decoded.get("messages") if isinstance(decoded, dict) else None
    if isinstance(messages, list):
        assert hashes is not None
        assert len(hashes) == len(messages)
    else:
        assert hashes is None


@pytest.mark.parametrize("body", [b'{"a":1', b'{"a":1,}', b'{"a" 1}', b'{"a":1} x', b""])
def test_decode_body_refuses_what_json_loads_refuses(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_body(body)


def test_raw_digests_follow_the_bytes_sent() -> None:
    _, first = decode_body(b'{"messages":[{"role":"user","content":"hi"},{"x":1}]}')
    _, again = decode_body(b'{"stream":true, "messages":[{"role":"user","content":"hi"}, {"x":2}]}')
    _, spaced = decode_body(b'{"messages":[{"role": "user", "content": "hi"}]}')
    assert first is not None
    assert again is not None
    assert spaced is not None
    assert first[0] == again[0]  # the same bytes, wherever they are in the body
    assert first[1] != again[1]
    assert spaced[0] != first[0]  # other bytes: the normalized digest decides


def test_a_request_with_the_stored_history_and_more_continues() -> None:
    history = _history(40)
    prefix = _stored(history[:30])
    assert prefix.continued_by(_incoming(history))
    assert prefix.continued_by(_incoming(history[:30]))
    assert not prefix.continued_by(_incoming(history[:29]))  # shorter than the stored


def test_the_state_stays_small_and_round_trips() -> None:
    prefix = _stored(_history(500))
    state = prefix.to_state()
    assert len(state["digests"]) == WINDOW
    assert len(state["raws"]) == WINDOW + 1
    assert state["shifts"] == [[0, 0]]
    assert len(json.dumps(state)) < 2_000
    assert PrefixMap.of({"map": state}) == prefix


def test_an_edited_message_does_not_continue_in_the_window_or_before_it() -> None:
    history = _history(60)
    prefix = _stored(history)
    for index in (59, 50, 3, 0):
        edited = [dict(m) for m in history]
        edited[index]["content"] = "changed"
        assert not prefix.continued_by(_incoming(edited)), index


def test_re_serialized_messages_continue_on_their_normalized_digests() -> None:
    """A moved cache breakpoint near the end, or every message sent in other bytes (string
    contents as text blocks, other spacing): the same conversation."""
    history = _history(60)
    prefix = _stored(history)
    moved = [dict(m) for m in history]
    moved[58] = {**moved[58], "content": [{"type": "text", "text": "message 58"}]}
    moved[59] = {
        **moved[59],
        "content": [{"type": "text", "text": "message 59", "cache_control": {"type": "x"}}],
    }
    assert prefix.continued_by(_incoming(moved))
    blocks = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in history]
    assert prefix.continued_by(_incoming(blocks, indent=2))


def test_the_answer_then_the_clients_copy_of_it() -> None:
    history = _history(20)
    prefix = _stored(history)
    answer = {"role": "assistant", "content": [{"type": "text", "text": "the answer"}]}
    prefix.add_answer(digest(answer))
    assert prefix.count == 21
    assert prefix.answered == 20
    sent_back = [*history, answer, {"role": "user", "content": "next"}]
    assert prefix.continued_by(_incoming(sent_back))
    other = [*history, {"role": "assistant", "content": "another answer"}]
    assert not prefix.continued_by(_incoming(other))
    # A retry's answer becomes an alias of the stored one.
    prefix.add_alias(20, digest(other[-1]))
    assert prefix.continued_by(_incoming(other))
    assert prefix.continued_by(_incoming(history), upto=20)


def test_start_of_maps_stored_messages_to_client_indexes() -> None:
    prefix = PrefixMap()
    # Client messages 0, 1, then 2 and 3 joined into one stored message, then 4 split in two.
    prefix.add_starts([0, 1, 2, 4, 4, 5])
    assert [prefix.start_of(k) for k in range(6)] == [0, 1, 2, 4, 4, 5]
    assert prefix.start_of(6) is None
    assert prefix.start_of(-1) is None
    assert len(prefix.shifts) < 6  # run-length encoded


def test_the_first_format_is_read() -> None:
    """Sessions mapped before this map kept every digest and start in lists."""
    history = _history(30)
    old = {
        "provider": "anthropic",
        "offset": 0,
        "digests": [digest(m) for m in history],
        "starts": list(range(30)),
        "answered": 29,
    }
    prefix = PrefixMap.of(old)
    assert prefix.count == 30
    assert prefix.answered == 29
    assert prefix.stored == 30
    assert prefix.continued_by(_incoming([*history, {"role": "user", "content": "more"}]))
    edited = [*history[:-1], {"role": "assistant", "content": "not it"}]
    assert not prefix.continued_by(_incoming(edited))
