"""Where a new proxied Claude Code conversation comes from (README, "The proxy").

Claude Code sends its session id with every request (`metadata.user_id`: the key
"cc:<id>"). A conversation of a session id the proxy has seen before is one of two things:
- a subagent (its Agent tool): its own system prompt and tools, its first message the
  `prompt` of an Agent call of the conversation that started it. It is stored as a session
  of its own under that conversation (`parent`, `parent_tool_use_id`), as the importer
  links a transcript's subagents. When the call is not stored yet (Claude Code starts a
  tool as soon as the call is complete, before the answer ends), Claude Code's own mark in
  its system prompt says so, the newest conversation of the session id is the parent, and
  the call's id is filled in once the answer holding it is stored (`link_agent_calls`);
- else the same work going on after the client compacted its own history (`/compact`):
  a new session, titled after the one it continues.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth.models import User

from sessions_app.importers.blocks import prompt_text, short_title
from sessions_app.models import Message, Session
from sessions_app.services.sessions.lifecycle import sessions_for

__all__ = ["Origin", "link_agent_calls", "origin_of"]

#: How many of the session id's newest conversations are looked at.
_RECENT_CONVERSATIONS: Final = 4
#: How many of a conversation's newest assistant messages are searched for the Agent call.
_RECENT_REPLIES: Final = 4
#: What Claude Code writes in a subagent's system prompt (its billing header).
_SUBAGENT_MARK: Final = "cc_is_subagent=true"
#: How a continued conversation is titled (the title of the one it continues).
CONTINUED: Final = "{title} (continued)"


@dataclass(frozen=True)
class Origin:
    """A subagent's `parent` and the call that started it ("" when not found), or the
    conversation a client-compacted one continues."""

    parent: Session | None = None
    tool_use_id: str = ""
    continues: Session | None = None

    def title(self, own: str) -> str:
        """The new session's title: its own, or after the conversation it continues."""
        if self.continues is None:
            return own
        return CONTINUED.format(title=self.continues.title.removesuffix(" (continued)"))


def origin_of(owner: User, key: str, tools: Any, system: Any, title: str) -> Origin:
    """Where a new conversation with Claude Code key `key` comes from (an empty Origin for
    a first one, or for another client). `title`: its own title, from its first message."""
    if not key.startswith("cc:"):
        return Origin()
    earlier = list(
        sessions_for(owner)
        .filter(proxy_key=key[:200], parent__isnull=True, proxy_overhead__has_key="tools")
        .order_by("-created_at")[:_RECENT_CONVERSATIONS]
    )
    if not earlier:
        return Origin()
    if tools:
        for session in earlier:
            call = _agent_call(session, title)
            if call:
                return Origin(parent=session, tool_use_id=call)
        if _SUBAGENT_MARK in json.dumps(system, default=str):
            return Origin(parent=earlier[0])
    return Origin(continues=earlier[0])


def _agent_call(session: Session, title: str) -> str:
    """The id of the session's newest tool call whose `prompt` gives `title`, else ""."""
    replies = Message.objects.filter(session=session, role="assistant").order_by("-seq")
    for content in replies.values_list("content", flat=True)[:_RECENT_REPLIES]:
        for block in content if isinstance(content, list) else ():
            if _asks_for(block, title):
                return str(block.get("id") or "")
    return ""


def _asks_for(block: Any, title: str | None) -> bool:
    """True when `block` is a tool call with a string `prompt` (giving `title`, if given)."""
    if not isinstance(block, Mapping) or block.get("type") != "tool_use":
        return False
    arguments = block.get("input")
    prompt = arguments.get("prompt") if isinstance(arguments, Mapping) else None
    if not isinstance(prompt, str):
        return False
    return title is None or short_title(prompt_text(prompt)) == title


def link_agent_calls(session: Session, content: Any) -> int:
    """Give the subagents of `session` still without their call the id of the call in
    `content` (an answer just stored) whose `prompt` opens them; how many were linked.
    Claude Code may start a subagent before the answer asking for it is stored."""
    blocks = content if isinstance(content, list) else []
    calls = {
        short_title(prompt_text(block["input"]["prompt"])): str(block.get("id") or "")
        for block in blocks
        if _asks_for(block, None)
    }
    linked = 0
    if not calls:
        return linked
    waiting = Session.objects.filter(parent=session, parent_tool_use_id="").only("pk", "title")
    for child in waiting:
        call = calls.get(child.title)
        if call:
            linked += Session.objects.filter(pk=child.pk).update(parent_tool_use_id=call[:200])
    return linked
