"""What the model sees now: the runtime context as engine messages or as an API payload."""

from __future__ import annotations

import json
from typing import Any

from ..models import CompactionProfile, Session
from .context_text import Format, context_text, payload_parts, system_text
from .entries import entry_message, load_entries
from .overhead import OVERHEAD_VALUES, overhead_values, session_overhead
from .policies import policy_for

__all__ = [
    "Format",
    "check",
    "context_body",
    "context_json",
    "context_payload",
    "runtime_messages",
    "system_text",
]

_FORMATS = ("anthropic", "openai")


def runtime_messages(session: Session) -> list[dict[str, Any]]:
    """The runtime context's engine messages in order, summaries included as summary messages."""
    return [entry_message(entry) for entry in load_entries(session)]


def context_payload(
    session: Session, fmt: Format = "anthropic", *, profile: CompactionProfile | None = None
) -> dict[str, Any]:
    """`{system, messages, tokens, limit, usage}`: the context as a ready request.

    anthropic: the leading system messages joined into `system`, then role/content messages.
    openai: one chat array in `messages` (system first, tool_calls, `role: "tool"` results);
    `system` is repeated beside it for convenience.
    """
    _check_format(fmt)
    system, messages, tokens = payload_parts(load_entries(session), fmt)
    tokens += session_overhead(session).total  # a proxied session's system and tools
    limit = policy_for(session, profile).context_limit
    return {
        "system": system,
        "messages": messages,
        "tokens": tokens,
        "limit": limit,
        "usage": round(tokens / limit, 6) if limit else None,
    }


def context_body(
    session: Session, fmt: Format = "anthropic", *, profile: CompactionProfile | None = None
) -> bytes:
    """`context_payload` as UTF-8 JSON, assembled once per session state and then cached.

    The Anthropic form is spliced from each entry's stored JSON text (no decode and
    re-encode); see `context_text` for the cache. Only `limit` and `usage`, which depend on
    the profile, are computed per call. The API's `GET .../context` returns these bytes.
    """
    _check_format(fmt)
    text = context_text(session, fmt)
    tokens = text.tokens + session_overhead(session).total  # a proxied session's system, tools
    limit = policy_for(session, profile).context_limit
    usage = json.dumps(round(tokens / limit, 6) if limit else None)
    if fmt == "openai":  # json.dumps' default separators, as the cached part has them
        tail = f', "tokens": {tokens}, "limit": {json.dumps(limit)}, "usage": {usage}}}'
    else:
        tail = f'],"tokens":{tokens},"limit":{limit},"usage":{usage}}}'
    return text.body + tail.encode()


def context_json(
    session: Session, fmt: Format = "anthropic", *, profile: CompactionProfile | None = None
) -> str:
    """`context_body` as text."""
    return context_body(session, fmt, profile=profile).decode()


def _check_format(fmt: str) -> None:
    if fmt not in _FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: anthropic, openai")


def check(session: Session, profile: CompactionProfile | None = None) -> dict[str, Any]:
    """`{should_compact, tokens, threshold, limit, usage}` from the cached counts (a sum).

    Reads the session's totals fresh from the database, so concurrent appends are seen.
    """
    fresh = Session.objects.filter(pk=session.pk).values("context_tokens", *OVERHEAD_VALUES).first()
    tokens = int(fresh["context_tokens"]) if fresh else session.context_tokens
    # A proxied session's system prompt and tool definitions go upstream too (overhead.py).
    tokens += overhead_values(fresh) if fresh else session_overhead(session).total
    policy = policy_for(session, profile)
    limit = policy.context_limit
    return {
        "should_compact": bool(policy.enabled and policy.scaled(tokens) >= policy.threshold),
        "tokens": tokens,
        "threshold": policy.threshold,
        "limit": limit,
        "usage": round(tokens / limit, 6) if limit else None,
        "profile": policy.name,
    }
