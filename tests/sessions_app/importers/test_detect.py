"""Format detection from content."""

from __future__ import annotations

import json

import pytest

from sessions_app.importers import canonical_format, detect_document, detect_format
from tests.sessions_app.transcripts import cc_user, jsonl

CASES = {
    "claude_code": jsonl(cc_user("u1", None, "hi")),
    "claude_code_bookkeeping_first": jsonl(
        {"type": "summary", "summary": "t", "leafUuid": "x"}, cc_user("u1", None, "hi")
    ),
    "codex": jsonl({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}),
    "codex_early": jsonl({"id": "x", "timestamp": "t", "instructions": ""}),
    "openai": json.dumps([{"role": "user", "content": "hi"}]),
    "openai_tools": json.dumps(
        {"messages": [{"role": "tool", "tool_call_id": "a", "content": ""}]}
    ),
    "anthropic": json.dumps({"system": "s", "messages": [{"role": "user", "content": "hi"}]}),
    "anthropic_blocks": json.dumps(
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": ""}]}]
    ),
    "swe_agent": json.dumps({"history": [], "trajectory": [], "info": {}}, indent=2),
    "openhands": json.dumps([{"id": 0, "source": "user", "action": "message", "args": {}}]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_detects_each_format(case: str) -> None:
    expected = case.removesuffix("_bookkeeping_first").removesuffix("_early")
    expected = expected.removesuffix("_tools").removesuffix("_blocks")
    assert detect_format(CASES[case]) == expected
    assert detect_format(CASES[case].encode()) == expected


def test_corrupt_first_line_does_not_hide_a_jsonl_format() -> None:
    assert detect_format("{broken\n" + jsonl(cc_user("u1", None, "hi"))) == "claude_code"


def test_unrecognised_content() -> None:
    assert detect_format("") is None
    assert detect_format("just text") is None
    assert detect_document({"nothing": 1}) is None
    assert detect_document([1, 2]) is None


def test_cut_document_heads_are_guessed() -> None:
    assert detect_format('{"history": [], "info": {"x": ') == "swe_agent"
    assert detect_format('[{"role": "assistant", "tool_calls": [') == "openai"
    assert (
        detect_format('{"messages": [{"role": "user", "content": [{"type": "tool_use"')
        == "anthropic"
    )


def test_format_names_and_aliases() -> None:
    assert canonical_format("Claude-Code") == "claude_code"
    assert canonical_format("traj") == "swe_agent"
    assert canonical_format("yaml") is None
