"""Recognising a transcript's format from its content (the file name is never trusted).

JSON-lines formats are recognised from their first lines: Codex rollouts wrap every record in
`{timestamp, type, payload}`; Claude Code lines carry `uuid`/`parentUuid`/`sessionId` or one of
its line types. JSON documents are recognised from their structure: a SWE-agent trajectory has
`history` and `trajectory`; an OpenHands event stream is a list of events with `source` and
`action`/`observation`; message lists are Anthropic-style when they use content blocks such as
tool_use/tool_result or a separate `system`, and OpenAI-style otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["ALIASES", "canonical_format", "detect_document", "detect_format", "detect_lines"]

#: Accepted spellings of each format name.
ALIASES: Final = {
    "claude_code": "claude_code",
    "claude-code": "claude_code",
    "claude": "claude_code",
    "codex": "codex",
    "codex_cli": "codex",
    "openai": "openai",
    "openai_chat": "openai",
    "chat": "openai",
    "anthropic": "anthropic",
    "anthropic_json": "anthropic",
    "swe_agent": "swe_agent",
    "swe-agent": "swe_agent",
    "traj": "swe_agent",
    "openhands": "openhands",
}

_CODEX_TYPES: Final = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
)
_CODEX_ITEMS: Final = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "custom_tool_call"}
)
_CLAUDE_TYPES: Final = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "attachment",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "permission-mode",
        "custom-title",
        "ai-title",
        "last-prompt",
        "cost-state",
        "api-request",
        "api-request-blob",
        "api-request-shape",
        "tools-used",
        "mode",
        "agent-name",
        "worktree-state",
    }
)
_CLAUDE_KEYS: Final = ("parentUuid", "sessionId", "leafUuid", "isSidechain")
_ANTHROPIC_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "compaction"}
)
_OPENAI_ROLES: Final = frozenset({"tool", "function", "developer"})
_OPENAI_PARTS: Final = frozenset({"image_url", "input_text", "input_audio", "refusal"})


def canonical_format(name: str) -> str | None:
    """The canonical format name for `name` (or an alias), None when unknown."""
    return ALIASES.get(name.strip().lower().replace(" ", "_"))


def detect_format(data: bytes | str) -> str | None:
    """The format of a whole transcript or of its beginning, None when not recognised."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = text.lstrip("\ufeff \t\r\n")
    if not text:
        return None
    first_objects = list(_leading_objects(text))
    if first_objects:
        found = detect_lines(first_objects)
        if found:
            return found
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return _detect_partial(text)
    return detect_document(document)


def detect_lines(objects: Iterable[Any]) -> str | None:
    """The format of a JSON-lines file from its first parsed lines."""
    for value in objects:
        if not isinstance(value, Mapping):
            continue
        kind = value.get("type")
        if "payload" in value and (kind in _CODEX_TYPES or "timestamp" in value):
            return "codex"
        if kind in _CODEX_ITEMS and "payload" not in value and "uuid" not in value:
            return "codex"  # an early rollout: bare response items
        if "instructions" in value and "id" in value and "timestamp" in value:
            return "codex"  # an early rollout's first line: the session header
        if any(key in value for key in _CLAUDE_KEYS):
            return "claude_code"
        if (kind in _CLAUDE_TYPES and "message" in value) or kind in {"summary", "custom-title"}:
            return "claude_code"
        if kind in _CLAUDE_TYPES and "role" not in value:
            return "claude_code"
    return None


def detect_document(value: Any) -> str | None:
    """The format of a parsed JSON document."""
    if isinstance(value, Mapping):
        if isinstance(value.get("history"), list) and ("trajectory" in value or "info" in value):
            return "swe_agent"
        if isinstance(value.get("events"), list) and _is_event_stream(value["events"]):
            return "openhands"
        messages = value.get("messages")
        if isinstance(messages, list):
            if "system" in value and not isinstance(value.get("system"), Mapping):
                return "anthropic"
            return _message_list_format(messages, default="anthropic")
        return None
    if isinstance(value, list):
        if _is_event_stream(value):
            return "openhands"
        if any(isinstance(item, Mapping) and "role" in item for item in value[:50]):
            return _message_list_format(value, default="openai")
    return None


def _message_list_format(messages: list[Any], *, default: str) -> str:
    # A `role: "system"` message is only a hint (Claude Code's recorded Anthropic requests
    # carry them too): the blocks decide when they say something.
    system_role = False
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in _OPENAI_ROLES or "tool_calls" in message:
            return "openai"
        if message.get("type") == "compaction" and "role" not in message:
            return "openai"  # an OpenAI Responses compaction item
        system_role = system_role or message.get("role") == "system"
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                kind = block.get("type") if isinstance(block, Mapping) else None
                if kind in _ANTHROPIC_BLOCKS:
                    return "anthropic"
                if kind in _OPENAI_PARTS:
                    return "openai"
                if kind == "image" and isinstance(block.get("source"), Mapping):
                    return "anthropic"
    return "openai" if system_role else default


def _is_event_stream(items: list[Any]) -> bool:
    events = [item for item in items[:50] if isinstance(item, Mapping)]
    if not events:
        return False
    matching = sum(1 for e in events if "source" in e and ("action" in e or "observation" in e))
    return matching * 2 >= len(events)


def _leading_objects(text: str, limit: int = 20) -> Iterable[Any]:
    """Parsed JSON objects among the first lines (a corrupt line is passed over)."""
    for count, line in enumerate(text.splitlines()):
        if count >= limit:
            return
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value


def _detect_partial(text: str) -> str | None:
    """A guess from the beginning of a JSON document too long to parse here."""
    head = text[:65536]
    if '"history"' in head and ('"trajectory"' in head or '"info"' in head):
        return "swe_agent"
    if (
        head.startswith("[")
        and '"source"' in head
        and ('"action"' in head or '"observation"' in head)
    ):
        return "openhands"
    if '"tool_calls"' in head or '"role": "tool"' in head or '"role":"tool"' in head:
        return "openai"
    if '"tool_use"' in head or '"tool_result"' in head:
        return "anthropic"
    if head.startswith("{") and '"messages"' in head:
        return "anthropic"
    if head.startswith("[") and '"role"' in head:
        return "openai"
    return None
