"""Which proxied conversation started a Claude Code subagent (README, "The proxy").

Claude Code runs a subagent (its Agent tool) as a conversation of its own, sent with the
session id of the conversation that started it, its own system prompt and tools. The proxy
stores it as a session of its own, linked to that conversation as the importer links a
transcript's subagents: `parent`, and `parent_tool_use_id` when the Agent call that asked
for it is found (its `prompt` is the subagent's first message).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from django.contrib.auth.models import User

from ..importers.blocks import prompt_text, short_title
from ..models import Message, Session
from .sessions import sessions_for

__all__ = ["Spawner", "spawner_of"]

#: How many of the parent's newest assistant messages are searched for the Agent call.
_RECENT_REPLIES: Final = 4


class Spawner:
    """The conversation a subagent came from, and the tool call that started it ("" when
    not found)."""

    def __init__(self, session: Session, tool_use_id: str) -> None:
        self.session = session
        self.tool_use_id = tool_use_id


def spawner_of(owner: User, key: str, tools: Any, overhead: str, title: str) -> Spawner | None:
    """The main conversation a new proxied conversation is a subagent of, or None.

    A subagent shares a Claude Code session id (`key` "cc:...") with an earlier session
    that has tools, and comes with tools and another system prompt or tools (`overhead`:
    their digest; a conversation the client compacted itself keeps its own). `title`: the
    new conversation's title, matched against the prompts of the parent's Agent calls.
    """
    if not key.startswith("cc:") or not tools:
        return None
    parent = (
        sessions_for(owner)
        .filter(proxy_key=key[:200], parent__isnull=True, proxy_overhead__has_key="tools")
        .exclude(proxy_state__overhead_digest=overhead)
        .order_by("created_at")
        .first()
    )
    if parent is None:
        return None
    return Spawner(parent, _agent_call(parent, title))


def _agent_call(parent: Session, title: str) -> str:
    """The id of the parent's newest tool call whose `prompt` gives `title`, else ""."""
    replies = Message.objects.filter(session=parent, role="assistant").order_by("-seq")
    for reply in replies[:_RECENT_REPLIES]:
        for block in reply.content if isinstance(reply.content, list) else ():
            if _asks_for(block, title):
                return str(block.get("id") or "")
    return ""


def _asks_for(block: Any, title: str) -> bool:
    if not isinstance(block, Mapping) or block.get("type") != "tool_use":
        return False
    arguments = block.get("input")
    prompt = arguments.get("prompt") if isinstance(arguments, Mapping) else None
    return isinstance(prompt, str) and short_title(prompt_text(prompt)) == title
