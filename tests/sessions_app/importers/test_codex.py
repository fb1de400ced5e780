"""The Codex CLI rollout importer."""

from __future__ import annotations

from typing import Any

from compaction import blocks_of, validate_messages
from sessions_app.importers import ImportedSession, parse_text
from tests.sessions_app.transcripts import jsonl

WHEN = "2025-09-01T10:00:00.000Z"


def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": WHEN, "type": kind, "payload": payload}


def item(**payload: Any) -> dict[str, Any]:
    return line("response_item", payload)


def message(role: str, text: str, kind: str = "input_text") -> dict[str, Any]:
    return item(type="message", role=role, content=[{"type": kind, "text": text}])


META = line("session_meta", {"id": "rollout-1", "cwd": "/repo", "cli_version": "0.50.0"})


def _valid(session: ImportedSession) -> None:
    assert validate_messages(list(session.history())) == []
    assert validate_messages(session.context_messages()) == []


def test_function_calls_pair_with_their_outputs() -> None:
    session = parse_text(
        jsonl(
            META,
            line("turn_context", {"model": "gpt-5-codex"}),
            message("user", "list files"),
            item(
                type="reasoning",
                summary=[{"type": "summary_text", "text": "think"}],
                encrypted_content="xx",
            ),
            item(type="function_call", name="shell", arguments='{"command": ["ls"]}', call_id="c1"),
            item(type="function_call", name="shell", arguments="not json", call_id="c2"),
            item(type="function_call_output", call_id="c1", output="a.txt"),
            item(type="function_call_output", call_id="c2", output="error"),
            message("assistant", "Found a.txt", "output_text"),
        )
    )
    assert session.external_id == "rollout-1"
    assert session.model == "gpt-5-codex"
    assert session.metadata["cwd"] == "/repo"
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    reply = blocks_of(session.messages[1].message)
    assert reply[0] == {"type": "thinking", "thinking": "think"}
    assert reply[1]["input"] == {"command": ["ls"]}
    assert reply[2]["input"] == {"raw": "not json"}
    assert session.messages[1].extra["encrypted_reasoning"] == ["xx"]
    results = blocks_of(session.messages[2].message)
    assert [(b["tool_use_id"], b["content"]) for b in results] == [("c1", "a.txt"), ("c2", "error")]
    assert session.title == "list files"
    _valid(session)


def test_custom_tool_calls_and_structured_outputs() -> None:
    patch = "*** Begin Patch\n*** End Patch"
    session = parse_text(
        jsonl(
            message("user", "patch it"),
            item(type="custom_tool_call", name="apply_patch", input=patch, call_id="p1"),
            item(
                type="custom_tool_call_output",
                call_id="p1",
                output=[{"type": "input_text", "text": "Done"}],
            ),
        )
    )
    call = blocks_of(session.messages[1].message)[0]
    assert call["input"] == {"raw": patch}
    result = blocks_of(session.messages[2].message)[0]
    assert result["content"] == [{"type": "text", "text": "Done"}]
    _valid(session)


def test_compacted_line_is_a_compaction_point_with_its_replacement_history() -> None:
    session = parse_text(
        jsonl(
            message("user", "one"),
            message("assistant", "1", "output_text"),
            line(
                "compacted",
                {
                    "message": "We did one.",
                    "replacement_history": [
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "one"}],
                        },
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "SUMMARY: one"}],
                        },
                    ],
                },
            ),
            line("event_msg", {"type": "context_compacted"}),
            message("user", "two"),
        )
    )
    (compaction,) = session.compactions
    assert compaction.summary == "We did one."
    assert (compaction.first_index, compaction.last_index) == (0, 1)
    context = session.context_messages()
    assert "SUMMARY: one" in context[0]["content"][0]["text"]
    assert context[1]["content"] == [{"type": "text", "text": "two"}]
    assert session.metadata["kept_raw_types"]["event_msg/context_compacted"] == 1
    _valid(session)


def test_compacted_line_without_replacement_history() -> None:
    session = parse_text(jsonl(message("user", "one"), line("compacted", {"message": "sum"})))
    assert session.context_messages()[0]["content"] == "sum"


def test_token_count_gives_the_reply_usage_and_rollback_trims_the_context() -> None:
    usage = {"input_tokens": 100, "output_tokens": 7}
    session = parse_text(
        jsonl(
            message("user", "first"),
            message("assistant", "a", "output_text"),
            line("event_msg", {"type": "token_count", "info": {"last_token_usage": usage}}),
            message("user", "second"),
            message("assistant", "b", "output_text"),
            line("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        )
    )
    assert session.messages[1].usage == usage
    assert session.counts()["messages"] == 4  # history keeps the rolled-back turn
    assert [c.index for c in session.context] == [0, 1]


def test_developer_messages_and_injected_context() -> None:
    session = parse_text(
        jsonl(
            message("developer", "You are Codex."),
            message("user", "<environment_context>cwd=/repo</environment_context>"),
            message("user", "real question"),
            message("developer", "<permissions instructions>x</permissions instructions>"),
        )
    )
    assert session.messages[0].role == "system"
    assert session.messages[1].message["is_meta"] is True
    moved = session.messages[3]
    assert moved.role == "user"
    assert moved.extra["original_role"] == "developer"
    assert session.title == "real question"
    _valid(session)


def test_early_rollout_format_with_bare_items() -> None:
    session = parse_text(
        jsonl(
            {"id": "old-1", "timestamp": WHEN, "instructions": "be helpful"},
            {"record_type": "state"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": {"content": "ok", "success": True},
            },
        )
    )
    assert session.external_id == "old-1"
    assert blocks_of(session.messages[2].message)[0]["content"] == "ok"
    assert session.kept_raw == 2  # the header and the state line


def test_corrupt_line_is_skipped_with_its_number() -> None:
    session = parse_text(
        jsonl(message("user", "hi"), "{truncated", message("assistant", "yo", "output_text"))
    )
    assert [(s.line, "JSON" in s.reason) for s in session.skipped] == [(2, True)]
    assert session.counts()["messages"] == 2
