"""The canonical form of a message (sessions_app/canonical.py): a client's re-serialization
of the same message has the same digest, a real edit another (issue 23 item 1)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.canonical import (
    FORM,
    canonical,
    canonical_digest,
    canonical_json,
    legacy_digest,
)
from sessions_app.services.proxying.prefix_map import ROOT, Incoming, PrefixMap, chain

_TEXT = st.text(min_size=1, max_size=12)
_SCALAR = st.one_of(st.integers(-5, 5), _TEXT, st.booleans())
_INPUT = st.dictionaries(st.sampled_from(["path", "command", "n", "flag"]), _SCALAR, max_size=3)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


_RESULT = st.builds(
    lambda i, c, e: {"type": "tool_result", "tool_use_id": f"t{i}", "content": c, "is_error": e},
    st.integers(0, 9),
    st.one_of(_TEXT, st.lists(_TEXT.map(_text), min_size=1, max_size=2)),
    st.booleans(),
)
_USE = st.builds(
    lambda i, n, x: {"type": "tool_use", "id": f"t{i}", "name": n, "input": x},
    st.integers(0, 9),
    st.sampled_from(["Read", "Bash"]),
    _INPUT,
)
_BLOCKS = st.lists(st.one_of(_TEXT.map(_text), _USE, _RESULT), min_size=1, max_size=3)
MESSAGES = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant", "system"]),
    st.one_of(_TEXT, _BLOCKS),
)


def _reserialized(value: Any, rng: random.Random, *, content: bool = False) -> Any:
    """`value` as another client (or the same one a turn later) could send it: a string
    content as one text block and back, `cache_control` added or dropped, `false` and null
    markers added, keys in another order."""
    if content and isinstance(value, str) and rng.random() < 0.5:
        value = [_text(value)]
    elif content and _one_text(value) and rng.random() < 0.5:
        return value[0]["text"]
    if isinstance(value, list):
        return [_reserialized(item, rng) for item in value]
    if not isinstance(value, dict):
        return value
    holds = "role" in value or value.get("type") == "tool_result"
    items = [
        (key, _reserialized(item, rng, content=holds and key == "content"))
        for key, item in value.items()
        if key != "cache_control"
    ]
    if "type" in value and rng.random() < 0.3:
        items.append(("cache_control", {"type": "ephemeral"}))
    if value.get("type") == "tool_use" and rng.random() < 0.3:
        items.append(("citations", None))
    if value.get("type") == "tool_result" and "is_error" not in value:
        items.append(("is_error", False))
    rng.shuffle(items)
    return dict(items)


def _one_text(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 1
        and isinstance(value[0], dict)
        and {k for k in value[0] if k != "cache_control"} == {"type", "text"}
        and value[0]["type"] == "text"
    )


@settings(max_examples=200, deadline=None)
@given(message=MESSAGES, seed=st.integers(0, 2**32))
def test_a_reserialized_message_has_the_same_digest(message: dict[str, Any], seed: int) -> None:
    again = _reserialized(message, random.Random(seed))
    assert canonical_digest(again) == canonical_digest(message)
    assert canonical_json(again) == canonical_json(message)


@settings(max_examples=200, deadline=None)
@given(message=MESSAGES, seed=st.integers(0, 2**32), data=st.data())
def test_an_edited_text_has_another_digest(
    message: dict[str, Any], seed: int, data: st.DataObject
) -> None:
    edited = _edited(message, data.draw(st.integers(0, 50)))
    again = _reserialized(edited, random.Random(seed))
    assert canonical_digest(again) != canonical_digest(message)


def _edited(message: dict[str, Any], pick: int) -> dict[str, Any]:
    """`message` with one character added to one of its texts."""
    content = message["content"]
    if isinstance(content, str):
        return {**message, "content": content + "!"}
    blocks = [dict(block) for block in content]
    block = blocks[pick % len(blocks)]
    if block["type"] == "text":
        block["text"] += "!"
    elif block["type"] == "tool_use":
        block["name"] += "!"
    else:
        inner = block["content"]
        block["content"] = inner + "!" if isinstance(inner, str) else [_text("!"), *inner]
    return {**message, "content": blocks}


def test_what_is_ignored_and_what_is_not() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "Edit", "input": {"path": "a"}}
    filled = {**call, "input": {"replace_all": False, "path": "a"}}  # Claude Code's default
    assert canonical_digest({"role": "assistant", "content": [call]}) == canonical_digest(
        {"role": "assistant", "content": [filled]}
    )
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    marked = {
        "tool_use_id": "t1",
        "type": "tool_result",
        "content": [{"type": "text", "text": "ok", "cache_control": {"type": "ephemeral"}}],
    }
    assert canonical({"role": "user", "content": [result]}) == canonical(
        {"role": "user", "content": [marked]}
    )
    system = {"role": "system", "content": "keep them updated"}
    listed = {"role": "system", "content": [{"type": "text", "text": "keep them updated"}]}
    assert canonical_digest(system) == canonical_digest(listed)
    # a tool's input is data, not content: a string there stays a string
    write = {"type": "tool_use", "id": "t2", "name": "Write", "input": {"content": "x"}}
    assert canonical(write)["input"] == {"content": "x"}
    # true is not false, 0 is not absent, an empty text is a text
    assert canonical_digest({"role": "user", "content": [{**result, "is_error": True}]}) != (
        canonical_digest({"role": "user", "content": [result]})
    )
    assert canonical({"n": 0}) == {"n": 0}
    assert canonical({"role": "user", "content": ""}) == {
        "role": "user",
        "content": [{"type": "text", "text": ""}],
    }


def test_legacy_digest_is_the_form_the_proxy_stored_before() -> None:
    plain = {"role": "user", "content": "hi", "cache_control": None}
    assert legacy_digest(plain) == canonical_digest(plain)  # no difference to make
    nested = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}],
    }
    assert legacy_digest(nested) != canonical_digest(nested)


class _Both(list[str]):
    """Digests with the form-1 ones beside them, as proxy/digests.py `Digests` gives."""

    legacy: list[str]


def _incoming(messages: list[dict[str, Any]]) -> Incoming:
    digests = _Both(canonical_digest(m) for m in messages)
    digests.legacy = [legacy_digest(m) for m in messages]
    return Incoming(digests)


def test_a_map_stored_before_the_canonical_form_still_matches_and_is_redigested() -> None:
    result = {"type": "tool_result", "tool_use_id": "t", "content": "x"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": "ok"},
    ] * 12  # past the window: the older ones are in the chain `base`
    old = PrefixMap(form=1)
    old_digests = [legacy_digest(m) for m in messages]
    old.count, old.start = len(messages), len(messages) - 16
    old.base = chain(ROOT, old_digests[: old.start])
    old.digests, old.raws = old_digests[old.start :], [""] * 17
    stored = PrefixMap.of({"map": {**old.to_state(), "form": None}})
    assert stored.form == 1
    grown: list[dict[str, Any]] = [*messages, {"role": "user", "content": "next"}]
    assert stored.continued_by(_incoming(grown))
    stored.extend(_incoming(grown))
    assert stored.form == FORM
    assert stored.base == chain(ROOT, [canonical_digest(m) for m in messages[: stored.start]])
    assert stored.continued_by(_incoming([*grown, {"role": "assistant", "content": "a"}]))
    assert not stored.continued_by(_incoming([{"role": "user", "content": "other"}, *grown[1:]]))
