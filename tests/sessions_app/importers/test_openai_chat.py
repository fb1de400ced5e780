"""OpenAI chat arrays, Anthropic requests, SWE-agent trajectories, OpenHands event streams,
and the parse entry points."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from compaction import blocks_of, validate_messages
from sessions_app.importers import (
    NO_RESULT_TEXT,
    ImportedSession,
    TranscriptError,
    UnknownFormatError,
    parse,
    parse_text,
)


def _valid(session: ImportedSession) -> None:
    assert validate_messages(list(session.history())) == []
    assert validate_messages(session.context_messages()) == []


def _call(call_id: str, name: str = "bash", arguments: str = '{"command": "ls"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- OpenAI -----------------------------------------------------------------------------------


def test_openai_tool_calls_and_tool_messages() -> None:
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "list"},
        {
            "role": "assistant",
            "content": "Sure.",
            "tool_calls": [_call("c1"), _call("c2", arguments="{bad")],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "err"},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a.txt"}]},
        {"role": "assistant", "content": "Done."},
    ]
    session = parse_text(json.dumps({"model": "gpt-4o", "messages": chat}), "openai")
    assert session.source_format == "openai"
    assert session.model == "gpt-4o"
    assert session.system == "Be brief."
    reply = blocks_of(session.messages[2].message)
    assert reply[0] == {"type": "text", "text": "Sure."}
    assert reply[1]["input"] == {"command": "ls"}
    assert reply[2]["input"] == {"raw": "{bad"}
    results = blocks_of(session.messages[3].message)
    assert [b["tool_use_id"] for b in results] == ["c2", "c1"]
    assert results[1]["content"] == [{"type": "text", "text": "a.txt"}]
    assert session.title == "list"
    _valid(session)


def test_openai_unanswered_call_orphan_result_and_reused_ids() -> None:
    chat = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "user", "content": "never mind"},
        {"role": "tool", "tool_call_id": "zz", "content": "stray"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "second run"},
    ]
    session = parse_text(json.dumps(chat))
    first_answer = blocks_of(session.messages[2].message)
    assert first_answer[0]["content"] == NO_RESULT_TEXT
    assert first_answer[0]["is_error"] is True
    stray = blocks_of(session.messages[3].message)[0]
    assert stray["type"] == "text"
    assert "zz" in stray["text"]
    assert "stray" in stray["text"]
    second_call = blocks_of(session.messages[4].message)[0]
    assert second_call["id"] == "c1~2"
    assert session.messages[4].extra["renamed_tool_ids"] == {"c1~2": "c1"}
    assert blocks_of(session.messages[5].message)[0]["tool_use_id"] == "c1~2"
    _valid(session)


def test_openai_system_in_the_middle_and_empty_content() -> None:
    chat = [
        {"role": "user", "content": ""},
        {"role": "system", "content": "Now be formal."},
        {"role": "assistant", "content": "Certainly."},
    ]
    session = parse_text(json.dumps(chat), "openai")
    assert session.messages[0].extra["ctxweb_placeholder"] is True
    moved = session.messages[1]
    assert moved.role == "user"
    assert moved.message["is_meta"] is True
    assert blocks_of(moved.message)[1]["text"] == "Now be formal."
    _valid(session)


def test_openai_reasoning_legacy_function_call_and_images() -> None:
    chat = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "reasoning_content": "hmm",
            "content": None,
            "function_call": {"name": "f", "arguments": "{}"},
        },
        {"role": "function", "name": "f", "content": "42"},
    ]
    session = parse_text(json.dumps(chat))
    image = blocks_of(session.messages[0].message)[1]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
    reply = blocks_of(session.messages[1].message)
    assert reply[0] == {"type": "thinking", "thinking": "hmm"}
    assert reply[1]["id"] == blocks_of(session.messages[2].message)[0]["tool_use_id"]
    _valid(session)


def test_openai_bad_items_are_skipped() -> None:
    session = parse_text(
        json.dumps([{"role": "user", "content": "hi"}, "nope", {"content": "no role"}]), "openai"
    )
    assert [(s.line, s.reason) for s in session.skipped] == [
        (2, "messages[1] is not an object"),
        (3, "messages[2] has no role"),
    ]


# -- Anthropic --------------------------------------------------------------------------------


def test_anthropic_request() -> None:
    body = {
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "hi", "id": "m0"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}],
            },
            42,
        ],
    }
    session = parse_text(json.dumps(body))
    assert session.source_format == "anthropic"
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "user"]
    assert session.messages[1].original_id == "m0"
    assert session.skipped[0].line == 4
    _valid(session)


# -- SWE-agent --------------------------------------------------------------------------------


def test_swe_agent_trajectory() -> None:
    traj = {
        "trajectory": [{"action": "ls"}],
        "info": {"exit_status": "submitted", "submission": "diff"},
        "replay_config": {
            "problem_statement": {"id": "repo__1"},
            "agent": {"model": {"name": "gpt-4o"}},
        },
        "history": [
            {"role": "system", "content": "You are an agent.", "agent": "main"},
            {"role": "user", "content": "demo", "is_demo": True},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Fix the bug", "cache_control": {"type": "ephemeral"}}
                ],
            },
            {
                "role": "assistant",
                "content": "Looking.",
                "thought": "Looking.",
                "tool_calls": [_call("c1")],
            },
            {"role": "tool", "content": "README", "tool_call_ids": ["c1"]},
        ],
    }
    session = parse_text(json.dumps(traj))
    assert session.source_format == "swe_agent"
    assert (session.external_id, session.title, session.model) == ("repo__1", "repo__1", "gpt-4o")
    assert session.messages[1].message["is_meta"] is True
    assert blocks_of(session.messages[4].message)[0]["tool_use_id"] == "c1"
    assert session.metadata["exit_status"] == "submitted"
    _valid(session)


# -- OpenHands --------------------------------------------------------------------------------


def _response(
    response_id: str, *calls: dict[str, Any], content: str = "Working."
) -> dict[str, Any]:
    return {
        "id": response_id,
        "model": "claude-x",
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        "choices": [
            {"message": {"role": "assistant", "content": content, "tool_calls": list(calls)}}
        ],
    }


def test_openhands_actions_and_observations() -> None:
    response = _response(
        "r1", _call("c1", "execute_bash"), _call("c2", "execute_bash", '{"command": "pwd"}')
    )
    events = [
        {
            "id": 0,
            "source": "agent",
            "action": "system",
            "args": {"content": "System prompt", "tools": ["t"]},
        },
        {
            "id": 1,
            "source": "user",
            "action": "message",
            "args": {"content": "do it", "image_urls": []},
        },
        {
            "id": 2,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls"},
            "tool_call_metadata": {
                "tool_call_id": "c1",
                "function_name": "execute_bash",
                "model_response": response,
            },
        },
        {
            "id": 3,
            "source": "agent",
            "action": "run",
            "args": {"command": "pwd"},
            "tool_call_metadata": {
                "tool_call_id": "c2",
                "function_name": "execute_bash",
                "model_response": response,
            },
        },
        {
            "id": 4,
            "source": "agent",
            "observation": "run",
            "cause": 3,
            "content": "/w",
            "extras": {},
        },
        {
            "id": 5,
            "source": "agent",
            "observation": "error",
            "content": "boom",
            "tool_call_metadata": {"tool_call_id": "c1"},
        },
        {"id": 6, "source": "environment", "observation": "agent_state_changed", "content": ""},
        {"id": 7, "source": "environment", "observation": "user_rejected", "content": "no"},
        {"id": 8, "source": "agent", "action": "message", "args": {"content": "Done."}},
    ]
    session = parse_text(json.dumps(events))
    assert session.source_format == "openhands"
    assert session.system == "System prompt"
    reply = session.messages[2]
    assert [b["type"] for b in blocks_of(reply.message)] == ["text", "tool_use", "tool_use"]
    assert blocks_of(reply.message)[2]["input"] == {"command": "pwd"}
    assert reply.usage == {"prompt_tokens": 5, "completion_tokens": 2}
    results = blocks_of(session.messages[3].message)
    assert [(b["tool_use_id"], b.get("is_error", False)) for b in results] == [
        ("c2", False),
        ("c1", True),
    ]
    assert session.messages[4].message["is_meta"] is True  # an observation with no call
    assert session.kept_raw == 1
    assert session.model == "claude-x"
    _valid(session)


# -- entry points -----------------------------------------------------------------------------


def test_unknown_format_name_and_undetectable_content() -> None:
    with pytest.raises(UnknownFormatError, match="unknown format 'yaml'"):
        parse_text("[]", "yaml")
    with pytest.raises(UnknownFormatError, match="could not recognise"):
        parse_text('{"hello": "world"}')


def test_invalid_json_document_is_an_error_naming_the_problem() -> None:
    with pytest.raises(TranscriptError, match="not valid JSON"):
        parse_text('{"messages": [', "openai")
    with pytest.raises(TranscriptError, match="cannot read"):
        parse("/nonexistent/file.jsonl")


def test_streams_of_text_and_bytes() -> None:
    chat = json.dumps([{"role": "user", "content": "hi"}])
    assert parse(io.StringIO(chat), "openai").counts()["messages"] == 1

    class OneWay(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

        def readinto(self, buffer: Any) -> int:
            chunk = self._data.read(len(buffer))
            buffer[: len(chunk)] = chunk
            return len(chunk)

    assert parse(OneWay(chat.encode()), name="x.json").source_name == "x.json"  # type: ignore[arg-type]
