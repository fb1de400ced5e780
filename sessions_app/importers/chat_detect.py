"""Telling the two message-list formats apart: Anthropic-style or OpenAI-style messages.

A message list is Anthropic-style when it uses content blocks such as tool_use/tool_result or
a separate `system`, and OpenAI-style otherwise. Shared by the `anthropic` and `openai`
formats' declarations (`anthropic_json.py`, `openai_chat.py`), which the registry asks after
the more specific documents (SWE-agent, OpenHands).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

__all__ = ["anthropic_head_score", "chat_format", "openai_head_score"]

Chat = Literal["anthropic", "openai"]

_ANTHROPIC_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "compaction"}
)
_OPENAI_ROLES: Final = frozenset({"tool", "function", "developer"})
_OPENAI_PARTS: Final = frozenset({"image_url", "input_text", "input_audio", "refusal"})


def chat_format(value: Any) -> Chat | None:
    """Which message-list format a parsed document is, None when it is no message list."""
    if isinstance(value, Mapping):
        messages = value.get("messages")
        if not isinstance(messages, list):
            return None
        if "system" in value and not isinstance(value.get("system"), Mapping):
            return "anthropic"
        return _message_list_format(messages, default="anthropic")
    if isinstance(value, list) and any(
        isinstance(item, Mapping) and "role" in item for item in value[:50]
    ):
        return _message_list_format(value, default="openai")
    return None


def openai_head_score(head: str) -> int:
    """How surely the beginning of a document is OpenAI messages (see `ImportFormat`)."""
    if '"tool_calls"' in head or '"role": "tool"' in head or '"role":"tool"' in head:
        return 3  # above Anthropic's clues
    if head.startswith("[") and '"role"' in head:
        return 1  # below them
    return 0


def anthropic_head_score(head: str) -> int:
    """How surely the beginning of a document is Anthropic messages (see `ImportFormat`)."""
    if '"tool_use"' in head or '"tool_result"' in head:
        return 2
    if head.startswith("{") and '"messages"' in head:
        return 2
    return 0


def _message_list_format(messages: list[Any], *, default: Chat) -> Chat:
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
