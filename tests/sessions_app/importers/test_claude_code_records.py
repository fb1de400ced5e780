"""Claude Code 2.1 metadata records: counted by type, read where known, never an error."""

from __future__ import annotations

import json

from compaction import blocks_of, validate_messages
from sessions_app.importers import ImportedSession, parse_text
from sessions_app.importers.detect import detect_format
from tests.sessions_app.transcripts import SESSION, cc_assistant, cc_user, jsonl, text

COST = {
    "type": "cost-state",
    "sessionId": SESSION,
    "totalCostUSD": 0.25,
    "totalAPIDuration": 7914,
    "totalLinesAdded": 3,
    "modelUsage": {
        "claude-test-1": {"inputTokens": 10, "outputTokens": 5, "costUSD": 0.2},
        "claude-haiku": {"inputTokens": 3, "outputTokens": 1, "costUSD": 0.05},
    },
}
REQUEST = {
    "type": "api-request",
    "sessionId": SESSION,
    "id": "r-1",
    "timestamp": "2025-07-01T10:00:00.500Z",
    "version": 1,
    "params": {
        "model": "claude-test-1",
        "messages": [
            {"role": "system", "content": "You are Claude Code."},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "<system-reminder>x</system-reminder>"},
        ],
    },
}


def _valid(session: ImportedSession) -> None:
    assert validate_messages(list(session.history())) == []
    assert validate_messages(session.context_messages()) == []


def _session(*records: object) -> ImportedSession:
    return parse_text(
        jsonl(
            cc_user("u1", None, "hi"),
            *records,
            cc_assistant("a1", "u1", [text("hello")], "m1", requestId="req_1"),
        )
    )


def test_metadata_records_become_session_metadata_and_stay_raw() -> None:
    session = _session(
        REQUEST,
        {"type": "api-request-blob", "sessionId": SESSION, "hash": "h", "message": {"x": 1}},
        {"type": "api-request-shape", "sessionId": SESSION, "shapeHash": "h", "shape": {}},
        COST,
        {"type": "last-prompt", "sessionId": SESSION, "lastPrompt": "hi", "leafUuid": "a1"},
        {"type": "tools-used", "sessionId": SESSION, "tools": ["Bash", {"name": "Read"}]},
        {"type": "queue-operation", "operation": "enqueue", "content": "x", "sessionId": SESSION},
        {"type": "queue-operation", "operation": "dequeue", "sessionId": SESSION},
        {"type": "permission-mode", "permissionMode": "plan", "sessionId": SESSION},
    )
    assert [m.role for m in session.messages] == ["user", "assistant"]  # no record is a turn
    metadata = session.metadata
    assert metadata["cost"]["totalCostUSD"] == 0.25
    assert set(metadata["cost"]["modelUsage"]) == {"claude-test-1", "claude-haiku"}
    assert metadata["api_requests"] == {
        "count": 1,
        "messages": 3,
        "system_messages": 2,
        "models": {"claude-test-1": 1},
    }
    assert metadata["last_prompt"] == "hi"
    assert metadata["last_prompt_leaf"] == "a1"
    assert metadata["tools_used"] == ["Bash", "Read"]
    assert metadata["queue_operations"] == {"dequeue": 1, "enqueue": 1}
    assert metadata["permission_mode"] == "plan"
    assert metadata["record_types"] == {
        "api-request": 1,
        "api-request-blob": 1,
        "api-request-shape": 1,
        "assistant": 1,
        "cost-state": 1,
        "last-prompt": 1,
        "permission-mode": 1,
        "queue-operation": 2,
        "tools-used": 1,
        "user": 1,
    }
    assert session.kept_raw == 9
    assert sum(metadata["kept_raw_types"].values()) == 9
    # Real usage and the request id stay on the message.
    assert session.messages[1].usage == {"input_tokens": 10, "output_tokens": 5}
    assert session.messages[1].extra["request_id"] == "req_1"
    assert session.messages[1].extra["model"] == "claude-test-1"
    _valid(session)


def test_the_last_cost_snapshot_wins() -> None:
    later = dict(COST, totalCostUSD=0.5)
    session = _session(COST, later)
    assert session.metadata["cost"]["totalCostUSD"] == 0.5


def test_records_of_unknown_shape_are_counted_never_fatal() -> None:
    session = _session(
        {"type": "api-request", "params": "not an object"},
        {"type": "api-request", "request": {"messages": "nope", "model": 7}},
        {"type": "cost-state"},
        {"type": "last-prompt", "lastPrompt": 42},
        {"type": "tools-used", "tools": "Bash"},
        {"type": "queue-operation"},
        {"type": "api-request-blob", "uuid": "b1", "parentUuid": "u1", "message": {"role": "x"}},
        {"type": "brand-new-record", "anything": [1, 2]},
    )
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.skipped_count == 0
    assert session.kept_raw == 8
    assert session.metadata["api_requests"]["count"] == 2
    assert session.metadata["cost"] == {}
    assert "last_prompt" not in session.metadata
    assert "tools_used" not in session.metadata
    assert session.metadata["queue_operations"] == {"unknown": 1}
    assert session.metadata["record_types"]["brand-new-record"] == 1
    _valid(session)


def test_the_request_model_is_the_fallback_model() -> None:
    session = parse_text(jsonl(REQUEST, cc_user("u1", None, "hi")))
    assert session.model == "claude-test-1"


def test_a_file_starting_with_new_records_is_claude_code() -> None:
    head = {"type": "cost-state", "totalCostUSD": 1}
    assert detect_format(jsonl(head, cc_user("u", None, "x"))) == "claude_code"
    assert detect_format(jsonl({"type": "api-request", "params": {}})) == "claude_code"


def test_a_recorded_request_with_system_messages_imports_as_anthropic() -> None:
    body = dict(REQUEST["params"])  # type: ignore[call-overload]
    body["messages"] = [
        *body["messages"],
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]},
    ]
    session = parse_text(json.dumps(body))
    assert session.source_format == "anthropic"
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "user", "assistant", "user"]
    moved = session.messages[2]
    assert moved.extra["original_role"] == "system"
    assert "<system-reminder>" in " ".join(str(b.get("text")) for b in blocks_of(moved.message))
    _valid(session)
