"""Request and response schemas of the REST API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from ninja import Schema
from pydantic import AfterValidator, Field, StrictBool, StrictInt, ValidationInfo
from pydantic_core import PydanticCustomError

from sessions_app.services.sessions.lifecycle import MAX_CONTEXT_LIMIT

from ..nul import NUL_MESSAGE, first_nul_path

__all__ = [
    "AppendIn",
    "AppendOut",
    "CheckIn",
    "CheckOut",
    "CompactIn",
    "CompactionDetailOut",
    "CompactionListOut",
    "CompactionOut",
    "CompactionResultOut",
    "ContextOut",
    "ErrorOut",
    "HealthOut",
    "HistoryMessageOut",
    "HistoryOut",
    "JobOut",
    "JobQueuedOut",
    "MarkerOut",
    "OffloadIn",
    "OffloadOut",
    "PrepareOut",
    "SessionCreateIn",
    "SessionListOut",
    "SessionOut",
    "StatelessCompactIn",
    "StatelessCompactOut",
    "Text",
]

ContextFormat = Literal["anthropic", "openai", "responses"]


def _refuse_nul(value: Any, info: ValidationInfo) -> Any:
    """`value` unchanged, or a validation error naming where a NUL character is."""
    field = info.field_name or ""
    where = first_nul_path(value, field)
    if where is None:
        return value
    message = NUL_MESSAGE if where == field else f"{where}: {NUL_MESSAGE}"
    raise PydanticCustomError("nul_character", message)


#: A string from the client: NUL characters are refused (PostgreSQL cannot store them).
Text = Annotated[str, AfterValidator(_refuse_nul)]
#: Any JSON from the client that is stored: no NUL character in any string or key.
Json = Annotated[Any, AfterValidator(_refuse_nul)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_refuse_nul)]


class ErrorOut(Schema):
    """Every error: `detail` is a message, or a list of `{path, message}` problems."""

    detail: Any


class HealthOut(Schema):
    status: str
    database: str


class SessionCreateIn(Schema):
    title: Text = Field("", max_length=300)
    messages: list[Any] = Field(default_factory=list)
    system: Json = None
    context_limit: StrictInt | None = Field(None, gt=0, le=MAX_CONTEXT_LIMIT)
    profile: Text | None = Field(None, max_length=64)
    model: Text = Field("", max_length=128)
    metadata: JsonObject = Field(default_factory=dict)


class SessionOut(Schema):
    id: UUID
    title: str
    source_format: str
    model: str
    external_id: str
    parent: UUID | None
    profile: str
    context_limit: int
    threshold: int
    version: int
    message_count: int
    history_tokens: int
    context_tokens: int
    context_entry_count: int
    compaction_count: int
    usage: float | None
    last_usage: dict[str, Any] | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class SessionListOut(Schema):
    items: list[SessionOut]
    next: str | None


class AppendIn(Schema):
    messages: list[Any] = Field(..., min_length=1)
    expected_version: StrictInt | None = Field(None, ge=0)


class AppendOut(Schema):
    appended: int
    first_seq: int
    last_seq: int
    token_counts: list[int]
    version: int
    message_count: int
    history_tokens: int
    context_tokens: int
    job_id: UUID | None = None


class HistoryMessageOut(Schema):
    seq: int
    role: str
    content: Any
    extra: dict[str, Any]
    created_at: datetime
    token_count: int
    original_id: str
    in_context: bool


class MarkerOut(Schema):
    number: int
    trigger: str
    status: str
    created_at: datetime
    first_seq: int | None
    last_seq: int | None
    summary: str
    summarizer: str
    original_token_count: int
    compacted_token_count: int
    compacted_message_count: int
    children: list[MarkerOut]


class HistoryOut(Schema):
    messages: list[HistoryMessageOut]
    compactions: list[MarkerOut]
    next: str | None


class ContextOut(Schema):
    system: Any
    messages: list[Any]
    tokens: int
    limit: int
    usage: float | None


class PrepareOut(ContextOut):
    compaction: dict[str, Any] | None
    skipped: str | None


class CheckIn(Schema):
    profile: Text | None = Field(None, max_length=64)


class CheckOut(Schema):
    should_compact: bool
    tokens: int
    threshold: int
    limit: int
    usage: float | None
    profile: str


class CompactIn(Schema):
    profile: Text | None = Field(None, max_length=64)
    instructions: Text | None = Field(None, max_length=20_000)
    dry_run: StrictBool = False
    summary: Text | None = None
    background: StrictBool = False


class CompactionOut(Schema):
    number: int
    parent: int | None
    status: str
    trigger: str
    created_at: datetime
    strategy: str
    summarizer: str
    model: str
    instructions: str
    first_seq: int | None
    last_seq: int | None
    summary: str
    original_token_count: int
    compacted_token_count: int
    compaction_ratio: float | None
    compacted_message_count: int
    retained_message_count: int
    recall: float | None
    messages_before: int
    messages_after: int
    duration_ms: int
    failure_reason: str | None
    children: list[int]
    #: The limits in force when it ran, in tokens (null: not known, e.g. imported).
    context_limit: int | None = None
    threshold_tokens: int | None = None
    hard_limit: int | None = None


class CompactionDetailOut(CompactionOut):
    details: dict[str, Any]
    originals: list[dict[str, Any]]
    transformed: list[dict[str, Any]]


class CompactionListOut(Schema):
    items: list[CompactionOut]
    next: str | None


class CompactionResultOut(Schema):
    """A compaction request's outcome; the compaction fields are null when none was stored."""

    compacted: bool
    dry_run: bool
    reason: str | None
    preview: dict[str, Any] | None = None
    number: int | None = None
    parent: int | None = None
    status: str | None = None
    trigger: str | None = None
    created_at: datetime | None = None
    compaction: CompactionOut | None = None


class JobQueuedOut(Schema):
    job_id: UUID
    status: str
    url: str


class JobOut(Schema):
    id: UUID
    session: UUID
    status: str
    phase: str
    events: list[dict[str, Any]]
    error: str
    attempts: int
    params: dict[str, Any]
    compaction: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None


class OffloadIn(Schema):
    min_chars: StrictInt | None = Field(None, ge=0)


class OffloadOut(Schema):
    offloaded_count: int
    freed_chars: int
    #: Names relative to the session's offload area, as the context's references give them.
    files: list[str] = Field(
        ..., description="the files written, by name (e.g. `tool-result-toolu_1.md`)"
    )
    entries_changed: int
    tokens_before: int
    tokens_after: int
    #: The compaction log's record of this offload (undo it with its revert); null: none.
    compaction: int | None = None


class StatelessCompactIn(Schema):
    messages: list[Any]
    system: Any = None
    profile: Text | None = Field(None, max_length=64)
    policy: dict[str, Any] | None = None
    instructions: Text | None = Field(None, max_length=20_000)
    force: StrictBool = True


class StatelessCompactOut(Schema):
    system: Any
    messages: list[Any]
    compacted: bool
    reason: str | None
    summary: str | None
    summarizer: str | None
    stats: dict[str, Any]
    tokens_before: int
    tokens_after: int
    events: list[dict[str, Any]]
    steps: list[dict[str, Any]]
