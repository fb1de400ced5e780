"""The value types every importer produces: plain dataclasses, no Django.

An `ImportedSession` holds the full history (`messages`, canonical Anthropic-style dicts with
their import data), the compaction points the source agent already made (`compactions`), the
runtime context the agent would send next (`context`: which messages and which compaction
summaries, in order), subagent sessions, and an account of every line that did not become a
message (`skipped` corrupt lines, `kept_raw` bookkeeping lines).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from compaction import SUMMARY_KEY, Message, blocks_of

__all__ = [
    "ContextItem",
    "ImportedCompaction",
    "ImportedMessage",
    "ImportedSession",
    "SkippedLine",
]


@dataclass
class ImportedMessage:
    """One history message: the canonical engine dict plus what the source said about it.

    `message` holds role, content and passthrough keys the engine keeps (such as `is_meta`);
    `extra` holds import data stored beside it (tool results' raw data, source ids, flags).
    """

    message: Message
    created_at: datetime | None = None
    original_id: str = ""
    usage: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def role(self) -> str:
        """The message's role."""
        return str(self.message.get("role", ""))


@dataclass
class ImportedCompaction:
    """A compaction the source agent made: it replaced messages[first_index..last_index].

    The range is None when the compaction covered no history message (for example a
    compaction right at the start). `summary` is the summary's text; `context_content` is the
    content the agent put in its context instead, when that is not just the summary text
    (Claude Code's summary message, Codex's replacement history). `absorbed_by` is the index
    of the later compaction that summarized this one again (nested markers). `at_message` is
    how many history messages came before it; the messages after `last_index` among those
    were kept in the context after the summary (Claude Code's preserved segment).
    """

    first_index: int | None
    last_index: int | None
    summary: str
    created_at: datetime | None = None
    trigger: str = ""
    pre_tokens: int | None = None
    post_tokens: int | None = None
    original_id: str = ""
    context_content: Any = None
    absorbed_by: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    at_message: int = 0

    def summary_message(self, number: int | None = None) -> Message:
        """The context message standing for this compaction (role user, marked as summary)."""
        content = self.context_content if self.context_content is not None else self.summary
        marker: dict[str, Any] = {"imported": True, "trigger": self.trigger}
        if number is not None:
            marker["compaction"] = number
        return {"role": "user", "content": content, SUMMARY_KEY: marker}


@dataclass(frozen=True)
class ContextItem:
    """One entry of the runtime context: a history message or a compaction's summary.

    `index` points into `ImportedSession.messages` (kind "message") or
    `ImportedSession.compactions` (kind "summary").
    """

    kind: Literal["message", "summary"]
    index: int


@dataclass(frozen=True)
class SkippedLine:
    """A line (or array item) that could not be imported, 1-based, with the reason."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class ImportedSession:
    """One imported session, ready to be stored (see `sessions_app.services.importing`)."""

    source_format: str
    messages: Sequence[ImportedMessage] = field(default_factory=list)
    title: str = ""
    external_id: str = ""
    model: str = ""
    compactions: list[ImportedCompaction] = field(default_factory=list)
    context: list[ContextItem] = field(default_factory=list)
    subagents: list[ImportedSession] = field(default_factory=list)
    parent_tool_use_id: str = ""
    skipped: list[SkippedLine] = field(default_factory=list)
    skipped_count: int = 0
    kept_raw: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    source_name: str = ""
    #: The file this session was read from, when it is a file of its own (subagent files).
    source_path: str = ""

    def history(self) -> Iterator[Message]:
        """The full history as engine messages (role, content and passthrough keys)."""
        for item in self.messages:
            yield item.message

    def context_messages(self) -> list[Message]:
        """The runtime context as engine messages: a valid Anthropic request."""
        result: list[Message] = []
        for item in self.context:
            if item.kind == "summary":
                result.append(self.compactions[item.index].summary_message(item.index + 1))
            else:
                result.append(self.messages[item.index].message)
        return result

    @property
    def system(self) -> str:
        """The text of the leading system messages (the system prompt), or ""."""
        parts: list[str] = []
        for item in self.messages:
            if item.role != "system":
                break
            parts.extend(str(b.get("text", "")) for b in blocks_of(item.message))
        return "\n\n".join(p for p in parts if p)

    def counts(self) -> dict[str, int]:
        """Messages, tool calls and results, compactions, subagents, skipped and raw lines."""
        calls = results = synthetic = 0
        for item in self.messages:
            for block in blocks_of(item.message):
                kind = block.get("type")
                if kind == "tool_use":
                    calls += 1
                elif kind == "tool_result":
                    results += 1
                    synthetic += bool(block.get("ctxweb_synthetic"))
        return {
            "messages": len(self.messages),
            "tool_calls": calls,
            "tool_results": results,
            "synthetic_results": synthetic,
            "compactions": len(self.compactions),
            "subagents": len(self.subagents),
            "skipped": self.skipped_count,
            "kept_raw": self.kept_raw,
        }

    def walk(self) -> Iterator[ImportedSession]:
        """This session and all its subagent sessions, depth first."""
        yield self
        for child in self.subagents:
            yield from child.walk()

    def close(self) -> None:
        """Release temporary storage held by large message lists (idempotent)."""
        for session in self.walk():
            closer = getattr(session.messages, "close", None)
            if callable(closer):
                closer()
