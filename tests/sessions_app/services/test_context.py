"""sessions_app.services.context.runtime: runtime messages, API payloads (Anthropic/OpenAI),
check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction import ScriptedSummarizer, count_tokens, is_summary_message
from sessions_app.models import ContextEntry, Session
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context.runtime import (
    check,
    context_json,
    context_payload,
    runtime_messages,
)
from tests.support.histories import assistant, tool_call, tool_results, user

pytestmark = pytest.mark.django_db


def test_runtime_messages_are_the_stored_messages_in_order(
    make_session: Any, conversation: Any
) -> None:
    messages = conversation(3)
    session = make_session(messages=messages)
    assert runtime_messages(session) == messages


def test_runtime_messages_include_summaries_as_summary_messages(
    make_session: Any, make_profile: Any, conversation: Any
) -> None:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    compact_session(session, summarizer=ScriptedSummarizer(default="the summary"))
    summaries = [m for m in runtime_messages(session) if is_summary_message(m)]
    assert len(summaries) == 1
    assert summaries[0]["role"] == "user"


def test_anthropic_payload_joins_leading_system_messages(make_session: Any) -> None:
    session = make_session(
        messages=[
            {"role": "system", "content": "one"},
            {"role": "system", "content": [{"type": "text", "text": "two"}]},
            user("hi", id="u1"),
            assistant("hello"),
        ],
        context_limit=1000,
    )
    payload = context_payload(session)
    assert payload.system == "one\n\ntwo"
    assert payload.messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert payload.tokens == session.context_tokens
    assert payload.limit == 1000
    assert payload.usage == pytest.approx(session.context_tokens / 1000, abs=1e-5)


def test_openai_payload_has_tool_calls_and_tool_messages(make_session: Any) -> None:
    session = make_session(
        messages=[
            {"role": "system", "content": "sys"},
            user("read it"),
            tool_call("t1", "Read", {"file_path": "a.py"}, text="reading"),
            tool_results(("t1", "print(1)")),
            assistant("done"),
        ]
    )
    chat = context_payload(session, "openai").messages
    assert chat[0] == {"role": "system", "content": "sys"}
    assert chat[2]["tool_calls"][0] == {
        "id": "t1",
        "type": "function",
        "function": {"name": "Read", "arguments": '{"file_path":"a.py"}'},
    }
    assert chat[2]["content"] == [{"type": "text", "text": "reading"}]  # blocks stay parts
    assert chat[3] == {"role": "tool", "tool_call_id": "t1", "content": "print(1)"}
    assert chat[4] == {"role": "assistant", "content": [{"type": "text", "text": "done"}]}


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_context_json_is_the_payload_as_json(
    make_session: Any, make_profile: Any, conversation: Any, fmt: str
) -> None:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    history = [{"role": "system", "content": [{"type": "text", "text": "sys \u00e9"}]}]
    history += conversation(12)[1:]
    session = make_session(messages=history, context_limit=3000, profile=profile)
    compact_session(session, summarizer=ScriptedSummarizer(default="the summary \u2603"))
    offload_session(session)
    assert json.loads(context_json(session, fmt)) == context_payload(session, fmt).to_dict()  # type: ignore[arg-type]


def test_unknown_format_is_refused(make_session: Any) -> None:
    with pytest.raises(ValueError):
        context_payload(make_session(messages=[user("hi")]), "xml")  # type: ignore[arg-type]


def test_check_uses_the_cached_counts(make_session: Any, conversation: Any) -> None:
    messages = conversation(4)
    session = make_session(messages=messages, context_limit=1000)
    result = check(session)
    assert result.tokens == count_tokens(messages)
    assert result.threshold == 920
    assert result.limit == 1000
    assert result.should_compact == (result.tokens >= 920)
    # A sum of cached counts, not a re-encode: doctored counts show through.
    ContextEntry.objects.filter(session=session).update(token_count=1)
    Session.objects.filter(pk=session.pk).update(context_tokens=len(messages))
    assert check(session).tokens == len(messages)
    assert check(session).usage == pytest.approx(len(messages) / 1000)
