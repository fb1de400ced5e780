"""Builders of small synthetic transcripts for the importer tests."""

from __future__ import annotations

import json
from typing import Any

SESSION = "sess-1"


def jsonl(*records: Any) -> str:
    """JSON lines (a str record is written as is, to make corrupt lines)."""
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def cc_user(uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    """A Claude Code user line."""
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": SESSION,
        "isSidechain": False,
        "timestamp": "2025-07-01T10:00:00.000Z",
        "message": {"role": "user", "content": content},
        **extra,
    }


def cc_assistant(
    uuid: str, parent: str | None, blocks: list[Any], mid: str, **extra: Any
) -> dict[str, Any]:
    """A Claude Code assistant line (one API response may span several)."""
    usage = extra.pop("usage", {"input_tokens": 10, "output_tokens": 5})
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": SESSION,
        "isSidechain": False,
        "timestamp": "2025-07-01T10:00:01.000Z",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": "claude-test-1",
            "content": blocks,
            "usage": usage,
        },
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(tool_id: str, name: str = "Bash", **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": input or {"command": "ls"}}


def tool_result(tool_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def boundary(uuid: str, logical_parent: str, **metadata: Any) -> dict[str, Any]:
    """A Claude Code compact_boundary line."""
    return {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": uuid,
        "parentUuid": None,
        "logicalParentUuid": logical_parent,
        "sessionId": SESSION,
        "timestamp": "2025-07-01T11:00:00.000Z",
        "content": "Conversation compacted",
        "compactMetadata": {"trigger": "manual", "preTokens": 1000, **metadata},
    }


def compact_summary(uuid: str, parent: str | None, summary: Any) -> dict[str, Any]:
    return cc_user(uuid, parent, summary, isCompactSummary=True)


def preserved_session_lines() -> str:
    """A compaction that kept its last exchange (u2, a2) in the context after the summary."""
    return jsonl(
        cc_user("u1", None, "one"),
        cc_assistant("a1", "u1", [text("1")], "m1"),
        cc_user("u2", "a1", "two"),
        cc_assistant("a2", "u2", [text("2")], "m2"),
        boundary(
            "b1", "a2", preservedSegment={"headUuid": "u2", "anchorUuid": "s1", "tailUuid": "a2"}
        ),
        compact_summary("s1", "b1", "about one"),
        cc_user("u3", "a2", "three"),
    )
