"""The OpenAI context after appends of each shape: extended when it can be, always the full build.

Each case appends batches one after the other to a read context; after each, the read (from
this process's copy, or from the stored file as a fresh process finds it) must be the bytes
of a build from the entries alone, and must have been an extension (no full build) exactly
when the batch converts as it would alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.models import Session
from sessions_app.services.context import openai as context_openai
from sessions_app.services.context import text as context_text_module
from sessions_app.services.context.runtime import context_body, context_payload
from sessions_app.services.context.text import clear_cache
from sessions_app.services.sessions import lifecycle as sessions_module
from sessions_app.services.sessions.lifecycle import append_messages
from tests.support.histories import assistant, exchange, system, tool_call, tool_results, user

pytestmark = pytest.mark.django_db

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"  # not decoded: any base64 text
BLOCKS = {
    "role": "user",
    "content": [
        {"type": "text", "text": "look at this é"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}},
    ],
}
THINKING = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "seen"},
    ],
}

#: name -> batches appended one after the other, each with whether its read extends.
CASES: dict[str, list[tuple[list[dict[str, Any]], bool]]] = {
    "plain text": [([user("one more question")], True), ([assistant("an answer")], True)],
    "a whole round": [([user("q"), *exchange("t9", result="out"), assistant("done")], True)],
    "same role": [([assistant("a second answer in a row")], False), ([user("q")], True)],
    "same role twice": [([user("q")], True), ([user("and another")], False)],
    "tool call then its result": [
        ([user("q"), tool_call("t9")], True),
        ([tool_results(("t9", "out"))], True),
        ([assistant("done")], True),
    ],
    "system message": [([system("a note")], True), ([user("q")], True)],
    "system after a tool call": [
        ([user("q"), tool_call("t9")], True),
        ([system("a note")], False),  # moved after the call's answer, still to come
        ([tool_results(("t9", "out"))], False),  # goes before the note
        ([assistant("done")], True),
    ],
    "system after a tool call in one batch": [
        ([user("q"), tool_call("t9"), system("a note"), tool_results(("t9", "out"))], True),
    ],
    "image, document and thinking blocks": [([BLOCKS], True), ([THINKING], True)],
}
#: Orders the append API refuses (a system message between a tool call and its result), so
#: written here without its check: a stored history of another origin may hold them.
UNCHECKED = {"system after a tool call", "system after a tool call in one batch"}


@pytest.fixture
def session(make_session: Any, conversation: Any) -> Session:
    made: Session = make_session(messages=[*conversation(2), user("go"), assistant("ok")])
    return made


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item per full build of the OpenAI body."""
    calls: list[int] = []
    build = context_openai.openai_body

    def counted(session: Session) -> Any:
        calls.append(1)
        return build(session)

    monkeypatch.setattr(context_text_module, "openai_body", counted)
    return calls


def reference(session: Session) -> bytes:
    """The response as decoded data would be encoded: no cache involved at all."""
    return json.dumps(context_payload(session, "openai").to_dict()).encode()


@pytest.mark.parametrize("reader", ["writer", "fresh"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_read_after_an_append_is_the_full_build(
    session: Session, case: str, reader: str, builds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    if case in UNCHECKED:
        monkeypatch.setattr(sessions_module, "validate_extension", lambda *_: [])
    assert context_body(session, "openai") == reference(session)
    for batch, extends in CASES[case]:
        append_messages(session, batch)
        session.refresh_from_db()
        if reader == "fresh":
            clear_cache(stored=False)  # only the stored response is left
        builds.clear()
        body = context_body(session, "openai")
        assert body == reference(session)
        assert (not builds) == extends, f"extended after {batch}"
    clear_cache()
    assert context_body(session, "openai") == body


def test_the_reference_is_the_full_build(session: Session) -> None:
    append_messages(session, [BLOCKS])
    clear_cache()
    assert context_body(session, "openai") == reference(session)
    assert "\\u00e9" in reference(session).decode(), "non-ASCII text escaped as in the build"


def test_an_append_after_only_system_messages_rebuilds_the_system_prompt(
    make_session: Any, builds: list[int]
) -> None:
    session = make_session(messages=[system("first")])
    context_body(session, "openai")
    append_messages(session, [system("second"), user("hi")])
    session.refresh_from_db()
    body = json.loads(context_body(session, "openai"))
    assert body["system"] == "first\n\nsecond"
    assert body["messages"][-1] == {"role": "user", "content": "hi"}
    assert len(builds) == 2
