"""The OpenAI SDK through the proxy: answers unchanged, conversations stored."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from sessions_app.models import Message, Session
from tests.support.fake_openai import ChatReply
from tests.support.fake_streaming import StreamingOpenAI

pytestmark = pytest.mark.django_db(transaction=True)


def test_chat_passes_through_and_is_stored(
    gpt: openai.OpenAI, upstream_openai: StreamingOpenAI
) -> None:
    upstream_openai.script(ChatReply.text("Four."))
    messages: Any = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "2+2?"},
    ]
    reply = gpt.chat.completions.create(model="gpt-test", messages=messages)
    assert reply.choices[0].message.content == "Four."
    sent = upstream_openai.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.api_key == "sk-openai-server-key"
    assert sent.body["messages"] == messages
    session = Session.objects.get()
    assert session.title == "2+2?"
    assert [m.role for m in Message.objects.order_by("seq")] == ["user", "assistant"]


@pytest.mark.parametrize("stream", [False, True])
def test_conversation_with_tools_maps_to_one_session(
    gpt: openai.OpenAI, upstream_openai: StreamingOpenAI, stream: bool
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    upstream_openai.script(
        ChatReply.message("tool_calls", content=None, tool_calls=[call]), ChatReply.text("Done.")
    )
    history: list[Any] = [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Run f."},
    ]
    for turn in range(2):
        if stream:
            chunks = gpt.chat.completions.create(
                model="m", messages=history, stream=True, stream_options={"include_usage": True}
            )
            text = ""
            calls: list[dict[str, Any]] = []
            for chunk in chunks:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    calls.extend(
                        c.model_dump(exclude_none=True) for c in choice.delta.tool_calls or []
                    )
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {k: v for k, v in c.items() if k != "index"} for c in calls
                ]
        else:
            reply = gpt.chat.completions.create(model="m", messages=history)
            message = reply.choices[0].message.model_dump(exclude_none=True)
        history.append(message)
        if turn == 0:
            history.append({"role": "tool", "tool_call_id": "call_1", "content": "ok"})
    session = Session.objects.get()
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1].content[0]["type"] == "tool_use"
    assert stored[2].content[0] == {"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}
    assert stored[3].content == [{"type": "text", "text": "Done."}]
    if stream:
        assert stored[3].extra["usage"]["total_tokens"] == 15
