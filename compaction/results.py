"""Pure value types the engine returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal, get_args

from .errors import FailureCause
from .messages import Message

__all__ = [
    "NOT_NEEDED",
    "SUMMARY_FAILURES",
    "CompactResult",
    "CompactStats",
    "CompactionEvent",
    "EventPhase",
    "FailureReason",
    "OffloadResult",
    "Partition",
    "PruneResult",
    "StepReport",
    "TruncateResult",
]

#: Why a summary failed: `SummaryError.reason`, and a rollback reason that starts the cooldown.
FailureReason = Literal[
    "content_none",
    "empty_summary",
    "max_tokens_no_content",
    "thinking_only_no_content",
    "api_error",
    "timeout",
    "summarizer_error",
    "time_budget",  # Policy.summary_time_budget_seconds spent before a retry could start
    "too_many_summary_calls",  # the middle needs more requests than Policy.max_summary_calls
    "refusal",
    "context_exceeded",
]

#: Rollback reasons that count as a failed summary (they start `Compactor`'s cooldown).
SUMMARY_FAILURES: Final = frozenset(get_args(FailureReason))
#: Reasons for returning the input unchanged that are not failures.
NOT_NEEDED: Final = frozenset(
    {"empty", "disabled", "below_threshold", "nothing_to_compact", "reserved_over_threshold"}
)

EventPhase = Literal[
    "compaction_start",
    "offload_done",
    "selective_start",
    "selective_done",
    "summary_start",
    "summary_retry",
    "summary_chunk",
    "summary_done",
    "retention_check",
    "smart_truncate_done",
    "hard_truncate_done",
    "archive_failed",
    "rollback",
    "compaction_done",
]


@dataclass(frozen=True)
class Partition:
    """Head (leading system messages), middle (to summarize) and tail (kept verbatim)."""

    head: list[Message]
    middle: list[Message]
    tail: list[Message]


@dataclass(frozen=True)
class CompactStats:
    """All zero / None when nothing was compacted (docs/behaviour.md#stats)."""

    original_token_count: int = 0
    compacted_token_count: int = 0
    compaction_ratio: float | None = None
    compacted_message_count: int = 0
    retained_message_count: int = 0
    recall: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stats as a plain dict with the seed's names."""
        return asdict(self)


@dataclass(frozen=True)
class CompactionEvent:
    """A meta event (docs/behaviour.md#events), reported through `on_event` while compacting."""

    phase: EventPhase
    tokens_before: int | None = None
    tokens_after: int | None = None
    tool_blocks_kept: int | None = None
    tool_blocks_dropped: int | None = None
    tool_calls_truncated: int | None = None
    tool_results_truncated: int | None = None
    reason: str | None = None
    attempt: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The event as a plain dict, with None fields left out."""
        return {k: v for k, v in asdict(self).items() if v is not None and v != {}}


@dataclass(frozen=True)
class StepReport:
    """What one step of the chain did: its name, whether it ran and changed things, its stats."""

    step: str
    ran: bool
    changed: bool
    tokens_before: int
    tokens_after: int
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CompactResult:
    """The outcome of `compact_messages`.

    `messages` is the new context (the input itself when not compacted). `reason` names why
    nothing was compacted, or a failure reason; `failure` is the last rollback's failure as
    fields (its HTTP status, the server's Retry-After, the summarizer, the exception's
    type), None when nothing rolled back; `archive_path` is where the originals went.
    """

    messages: list[Message]
    compacted: bool
    stats: CompactStats
    summary: str | None = None
    archive_path: str | None = None
    reason: str | None = None
    events: tuple[CompactionEvent, ...] = ()
    steps: tuple[StepReport, ...] = ()
    summarizer: str | None = None
    duration_ms: int = 0
    partition: Partition | None = None
    failure: FailureCause | None = None


@dataclass(frozen=True)
class TruncateResult:
    """The outcome of `smart_truncate` or `hard_truncate`."""

    messages: list[Message]
    truncated: bool
    tokens_before: int
    tokens_after: int
    removed_message_count: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OffloadResult:
    """The new messages, count, freed characters and absolute file paths
    (docs/behaviour.md#offloading)."""

    messages: list[Message]
    offloaded_count: int = 0
    freed_chars: int = 0
    files: list[str] = field(default_factory=list)
    #: tool_use_id -> file name, for ids that were not safe to use as a file name verbatim.
    renamed_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PruneResult:
    """The outcome of `prune_tool_blocks` (docs/behaviour.md#selective-pruning)."""

    messages: list[Message]
    tool_blocks_kept: int = 0
    tool_blocks_dropped: int = 0
    tool_calls_truncated: int = 0
    tool_results_truncated: int = 0
    #: Input messages removed whole (they held nothing but dropped tool blocks).
    dropped_messages: list[Message] = field(default_factory=list)
    #: Input messages kept in a changed form (blocks dropped or cut, or a same-role
    #: neighbour merged into them), as they were.
    changed_messages: list[Message] = field(default_factory=list)
    #: Input messages merged into the kept message before them (same role, made neighbours
    #: by a removal; see `compaction.alternation`), as they were.
    merged_messages: list[Message] = field(default_factory=list)
    #: For each output message, the index of the input message it stands for.
    source_indexes: list[int] = field(default_factory=list)
