"""Which session a request belongs to: the conversation key and the service request.

`X-Ctxweb-Session` (a session id or a name the client chose) when given; else Claude Code's
session id from `metadata.user_id`; else the client's own session id (Codex's `session-id`
header or `prompt_cache_key`: proxy/responses.py); else a fingerprint of the system prompt
and the first message. Sessions sharing a key are told apart by their stored prefix
(sessions_app/services/proxying/turns.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sessions_app.services.proxying.formats import ProxyFormat
from sessions_app.services.proxying.turns import ProxyRequest

from ..importers.blocks import prompt_text, short_title
from .base import Adapter, Conversation
from .digests import (
    Digests,
    claude_code_session,
    conversation_key,
    grouped,
    legacy_conversation_key,
)

__all__ = ["MAX_NAME", "proxy_request"]

#: The longest `X-Ctxweb-Session` name: its key `name:<name>` fits `Session.proxy_key`
#: (200 characters), so every request of the conversation finds the session it started.
MAX_NAME = 195


def proxy_request(
    adapter: Adapter,
    conversation: Conversation,
    *,
    name: str,
    mode: str = "",
    raw: Sequence[str] | None = None,
) -> ProxyRequest:
    """The service's view of one request. `raw`: the messages' raw digests, hashed from the
    request's bytes (digests.decode_body); else each message is dumped to hash it."""
    messages = conversation.messages
    if raw is not None and conversation.sizes:  # per element of the array: per message
        raw = grouped(raw, conversation.sizes)
    claude = claude_code_session(conversation.metadata)
    client = conversation.client_session[:150]  # the key fits Session.proxy_key
    legacy = ""
    if name:
        key = f"name:{name}"
    elif claude:
        key = f"cc:{claude}"
    elif client:
        key = f"{adapter.source_format}:{client}"
    else:
        key = conversation_key(adapter.source_format, conversation.system, messages[0])
        legacy = legacy_conversation_key(adapter.source_format, conversation.system, messages[0])

    def convert(start: int) -> list[list[dict[str, Any]]]:
        return adapter.canonical(messages[start:])

    return ProxyRequest(
        # the format stored and rendered: the provider's, but for Responses
        provider=cast(ProxyFormat, adapter.source_format),
        key=key,
        digests=Digests(messages, raw),
        convert=convert,
        title=_title(conversation),
        model=conversation.model,
        name=name,
        external_id=name or claude or client,
        system=conversation.system,
        tools=conversation.tools,
        mode=mode,
        legacy_key="" if legacy == key else legacy,
        source_format=_source_format(adapter, client),
        previous_response=conversation.previous_response,
    )


def _source_format(adapter: Adapter, client: str) -> str:
    """What a new session is labelled: a Responses conversation with a client session id
    is Codex's (its rollouts are imported as `codex`), else OpenAI's."""
    if adapter.source_format != "responses":
        return ""
    return "codex" if client else "openai"


def _title(conversation: Conversation) -> str:
    """The first words a person wrote (not the reminders an agent adds around them)."""
    if conversation.title:
        return conversation.title
    for message in conversation.messages:
        if message.get("role") == "user":
            text = prompt_text(message.get("content"))
            if text:
                return short_title(text)
    return ""
