"""What the model sees now: the runtime context as engine messages or as an API payload."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import TextField
from django.db.models.functions import Cast, Coalesce

from compaction.messages import blocks_of

from ..models import CompactionProfile, ContextEntry, Session
from .entries import entry_message, load_entries
from .openai_format import openai_messages
from .policies import policy_for

__all__ = ["check", "context_json", "context_payload", "runtime_messages", "system_text"]

Format = Literal["anthropic", "openai"]


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
    if fmt not in ("anthropic", "openai"):
        raise ValueError(f"unknown format {fmt!r}; known: anthropic, openai")
    entries = load_entries(session)
    tokens = sum(entry.token_count for entry in entries)
    messages = [entry_message(entry) for entry in entries]
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    system = system_text(messages[:head])
    body = [{"role": m["role"], "content": m["content"]} for m in messages[head:]]
    limit = policy_for(session, profile).context_limit
    out_messages = openai_messages(system, body) if fmt == "openai" else body
    return {
        "system": system,
        "messages": out_messages,
        "tokens": tokens,
        "limit": limit,
        "usage": round(tokens / limit, 6) if limit else None,
    }


def context_json(
    session: Session, fmt: Format = "anthropic", *, profile: CompactionProfile | None = None
) -> str:
    """`context_payload` as JSON text; the Anthropic form is spliced from the stored JSON.

    Each entry's content is read from the database as JSON text and copied into the output
    without being decoded and encoded again, so a large context costs one query and string
    joins (the API's `GET .../context` uses this).
    """
    if fmt != "anthropic":
        return json.dumps(context_payload(session, fmt, profile=profile), cls=DjangoJSONEncoder)
    raw = Cast(Coalesce("content", "message__content"), output_field=TextField())
    rows = list(
        ContextEntry.objects.filter(session=session)
        .order_by("position")
        .values_list("role", "token_count", raw)
    )
    head = 0
    while head < len(rows) and rows[head][0] == "system":
        head += 1
    system = system_text([{"role": "system", "content": json.loads(r[2])} for r in rows[:head]])
    tokens = sum(row[1] for row in rows)
    limit = policy_for(session, profile).context_limit
    roles = {role: json.dumps(role) for role in {row[0] for row in rows}}
    messages = ",".join(
        f'{{"role":{roles[role]},"content":{content}}}' for role, _, content in rows[head:]
    )
    usage = round(tokens / limit, 6) if limit else None
    return (
        f'{{"system":{json.dumps(system)},"messages":[{messages}],'
        f'"tokens":{tokens},"limit":{limit},"usage":{json.dumps(usage)}}}'
    )


def system_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Leading system messages joined into one prompt (None when there are none)."""
    if not messages:
        return None
    parts: list[str] = []
    for message in messages:
        parts.extend(
            str(block.get("text", ""))
            for block in blocks_of(message)
            if block.get("type") == "text"
        )
    return "\n\n".join(parts)


def check(session: Session, profile: CompactionProfile | None = None) -> dict[str, Any]:
    """`{should_compact, tokens, threshold, limit, usage}` from the cached counts (a sum).

    Reads the session's totals fresh from the database, so concurrent appends are seen.
    """
    fresh = Session.objects.filter(pk=session.pk).values("context_tokens").first()
    tokens = int(fresh["context_tokens"]) if fresh else session.context_tokens
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
