"""ctxweb's compaction engine: pure Python, no Django.

Count tokens, decide when to compact, and reduce an Anthropic-style message list by
summarizing its middle, pruning old tool output, offloading large results to files and
truncating as a last resort. Everything the engine needs (summarizer, blob store, clock,
policy) is passed in.
"""

from .blobstore import BlobStore, LocalBlobStore
from .clock import Clock, SystemClock
from .errors import (
    ArchiveError,
    BlobStoreError,
    CompactionError,
    InvalidMessagesError,
    PolicyError,
    Problem,
    SummaryError,
    UnknownEncodingError,
)
from .messages import Message, is_summary_message
from .policy import PRESETS, Policy
from .results import (
    CompactionEvent,
    CompactResult,
    CompactStats,
    OffloadResult,
    Partition,
    PruneResult,
    StepReport,
    TruncateResult,
)
from .summarizers.base import Summarizer, SummaryRequest
from .tokens import count_tokens, get_encoding, message_token_counts, message_tokens
from .validation import ensure_valid, validate_messages

__all__ = [
    "PRESETS",
    "ArchiveError",
    "BlobStore",
    "BlobStoreError",
    "Clock",
    "CompactResult",
    "CompactStats",
    "CompactionError",
    "CompactionEvent",
    "InvalidMessagesError",
    "LocalBlobStore",
    "Message",
    "OffloadResult",
    "Partition",
    "Policy",
    "PolicyError",
    "Problem",
    "PruneResult",
    "StepReport",
    "Summarizer",
    "SummaryError",
    "SummaryRequest",
    "SystemClock",
    "TruncateResult",
    "UnknownEncodingError",
    "count_tokens",
    "ensure_valid",
    "get_encoding",
    "is_summary_message",
    "message_token_counts",
    "message_tokens",
    "validate_messages",
]
