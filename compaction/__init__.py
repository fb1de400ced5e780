"""ctxweb's compaction engine: pure Python, no Django.

Count tokens, decide when to compact, and reduce an Anthropic-style message list by
summarizing its middle, pruning old tool output, offloading large results to files and
truncating as a last resort. Everything the engine needs (summarizer, blob store, clock,
policy) is passed in.

    from compaction import Policy, compact_messages

    result = compact_messages(messages, Policy.preset("balanced"), archive_dir="var/archives")
    if result.compacted:
        messages = result.messages
"""

from . import errors
from .blobstore import BlobStore, LocalBlobStore
from .clock import Clock, SystemClock
from .compact import compact_messages
from .compactor import Compactor
from .errors import (
    ArchiveError,
    BlobStoreError,
    CompactionError,
    InvalidFilesError,
    InvalidMessagesError,
    PolicyError,
    Problem,
    SummaryError,
    UnknownEncodingError,
)
from .folding import fold_file, fold_files
from .hard_truncate import hard_truncate
from .messages import Message, is_summary_message, make_summary_message
from .offload import offload_tool_results
from .partition import partition, should_compact
from .policy import PRESETS, STEPS, Policy
from .prune import prune_tool_blocks
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
from .smart_truncate import smart_truncate
from .summarizers import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    ScriptedSummarizer,
    Summarizer,
    SummaryRequest,
)
from .tokens import configure, count_tokens, get_encoding, message_token_counts, message_tokens
from .validation import ensure_valid, validate_messages

__all__ = [
    "PRESETS",
    "STEPS",
    "AnthropicSummarizer",
    "ArchiveError",
    "BlobStore",
    "BlobStoreError",
    "Clock",
    "CompactResult",
    "CompactStats",
    "CompactionError",
    "CompactionEvent",
    "Compactor",
    "ExtractiveSummarizer",
    "InvalidFilesError",
    "InvalidMessagesError",
    "LocalBlobStore",
    "Message",
    "OffloadResult",
    "Partition",
    "Policy",
    "PolicyError",
    "Problem",
    "PruneResult",
    "ScriptedSummarizer",
    "StepReport",
    "Summarizer",
    "SummaryError",
    "SummaryRequest",
    "SystemClock",
    "TruncateResult",
    "UnknownEncodingError",
    "compact_messages",
    "configure",
    "count_tokens",
    "ensure_valid",
    "errors",
    "fold_file",
    "fold_files",
    "get_encoding",
    "hard_truncate",
    "is_summary_message",
    "make_summary_message",
    "message_token_counts",
    "message_tokens",
    "offload_tool_results",
    "partition",
    "prune_tool_blocks",
    "should_compact",
    "smart_truncate",
    "validate_messages",
]
