"""What the model sees now: the runtime context as engine messages or as an API payload."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sessions_app.models import CompactionProfile, Session
from sessions_app.services.context.text import Format, context_text, payload_parts, system_text
from sessions_app.services.sessions.entries import entry_message, load_entries
from sessions_app.services.sessions.overhead import (
    OVERHEAD_VALUES,
    overhead_values,
    session_overhead,
)
from sessions_app.services.sessions.policies import policy_for
from sessions_app.services.sessions.threshold import session_standing

__all__ = [
    "ContextCheck",
    "ContextPayload",
    "Format",
    "check",
    "context_body",
    "context_json",
    "context_payload",
    "runtime_messages",
    "system_text",
]

_FORMATS = ("anthropic", "openai", "responses")


def runtime_messages(session: Session) -> list[dict[str, Any]]:
    """The runtime context's engine messages in order, summaries included as summary messages."""
    return [entry_message(entry) for entry in load_entries(session)]


@dataclass(frozen=True, slots=True)
class ContextPayload:
    """The context as a ready request: what `GET .../context` answers, decoded."""

    system: str | None
    messages: list[dict[str, Any]]
    tokens: int
    limit: int | None
    usage: float | None

    def to_dict(self) -> dict[str, Any]:
        """`{system, messages, tokens, limit, usage}` (the JSON response's keys)."""
        return {
            "system": self.system,
            "messages": self.messages,
            "tokens": self.tokens,
            "limit": self.limit,
            "usage": self.usage,
        }


@dataclass(frozen=True, slots=True)
class ContextCheck:
    """Whether the context should be compacted now, from the cached token counts."""

    should_compact: bool
    tokens: int
    threshold: int
    limit: int | None
    usage: float | None
    profile: str

    def to_dict(self) -> dict[str, Any]:
        """`{should_compact, tokens, threshold, limit, usage, profile}` (the `check` answer)."""
        return asdict(self)


def context_payload(
    session: Session, fmt: Format = "anthropic", *, profile: CompactionProfile | None = None
) -> ContextPayload:
    """The context as a ready request (`to_dict()`: `{system, messages, tokens, limit, usage}`).

    anthropic: the leading system messages joined into `system`, then role/content messages.
    openai: one chat array in `messages` (system first, tool_calls, `role: "tool"` results);
    `system` is repeated beside it for convenience.
    responses: OpenAI Responses items in `messages` (developer messages for the system
    part, function calls and their outputs, reasoning: exporters/responses.py).
    """
    _check_format(fmt)
    system, messages, tokens = payload_parts(load_entries(session), fmt)
    tokens += session_overhead(session).total  # a proxied session's system and tools
    limit = policy_for(session, profile).context_limit
    return ContextPayload(
        system=system,
        messages=messages,
        tokens=tokens,
        limit=limit,
        usage=round(tokens / limit, 6) if limit else None,
    )


def context_body(
    session: Session,
    fmt: Format = "anthropic",
    *,
    profile: CompactionProfile | None = None,
    just_read: bool = False,
) -> bytes:
    """`context_payload` as UTF-8 JSON, assembled once per session state and then cached.

    The Anthropic form is spliced from each entry's stored JSON text (no decode and
    re-encode); see `context_text` for the caches. The whole response is cached for the
    profile's limit and the session's overhead (a proxied session's system prompt and tool
    definitions, counted in `tokens`), so a repeated read returns the same bytes.
    `just_read`: `session` (and its profile, when loaded with it) were read from the
    database by this request, so their state stamp and profile need no second read.
    """
    _check_format(fmt)
    stamp = (session.context_revision, session.version) if just_read else None
    if profile is None and just_read and Session.profile.is_cached(session):
        profile = session.profile
    # The session's own limit is the policy's (no profile read, e.g. of the default one).
    limit = session.context_limit or policy_for(session, profile).context_limit
    overhead = session_overhead(session).total  # a proxied session's system and tools
    return context_text(session, fmt, limit, stamp=stamp, overhead=overhead).data


def context_json(
    session: Session, fmt: Format = "anthropic", *, profile: CompactionProfile | None = None
) -> str:
    """`context_body` as text."""
    return context_body(session, fmt, profile=profile).decode()


def _check_format(fmt: str) -> None:
    if fmt not in _FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(_FORMATS)}")


def check(
    session: Session, profile: CompactionProfile | None = None, *, just_read: bool = False
) -> ContextCheck:
    """Whether to compact now, from the cached counts (a sum); `to_dict()` is the answer.

    Reads the session's totals fresh from the database, so concurrent appends are seen,
    unless `just_read`: `session` was read from the database by this request.
    """
    fresh = None
    if not just_read:
        fresh = Session.objects.filter(pk=session.pk).values("context_tokens", *OVERHEAD_VALUES)
    row = fresh.first() if fresh is not None else None
    # A proxied session's system prompt and tool definitions go upstream too (overhead.py).
    counts = (int(row["context_tokens"]), overhead_values(row)) if row else None
    standing = session_standing(session, profile, counts=counts)
    return ContextCheck(
        should_compact=standing.over_threshold,
        tokens=standing.tokens,
        threshold=standing.threshold,
        limit=standing.context_limit,
        usage=standing.usage,
        profile=standing.profile,
    )
