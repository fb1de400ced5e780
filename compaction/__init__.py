"""ctxweb's compaction engine: pure Python, no Django.

Count tokens, decide when to compact, and reduce an Anthropic-style message list by
summarizing its middle, pruning old tool output, offloading large results to files and
truncating as a last resort. Everything the engine needs (summarizer, blob store, clock,
policy) is passed in.

    from compaction import Policy, compact_messages

    result = compact_messages(messages, Policy.preset("balanced"), archive_dir="var/archives")
    if result.compacted:
        messages = result.messages

The options of a run also come as one value, `CompactOptions`:

    options = CompactOptions(summarizer=summarizer, session_id="s1", token_counts=cached)
    result = compact_messages(messages, policy, options=options)

`__all__` is the whole public surface: the web app imports nothing else, and the modules
behind it are private (docs/architecture.md, "Engine").
"""

from . import errors
from .alternation import alternates, merge_adjacent_roles
from .archive import archive_name
from .blobstore import BlobStore, ExclusiveBlobStore, LocalBlobStore
from .carried_state import expand_path_groups
from .clock import Clock, SystemClock
from .errors import (
    ArchiveError,
    BlobStoreError,
    CompactionError,
    FailureCause,
    InvalidFilesError,
    InvalidMessagesError,
    PolicyError,
    Problem,
    SummaryError,
    UnknownEncodingError,
)
from .flow import compact_messages
from .folding import fold_file, fold_files
from .hard_truncate import hard_truncate
from .messages import (
    SUMMARY_KEY,
    SUMMARY_PREFIX,
    Block,
    Message,
    blocks_of,
    is_meta,
    is_summary_message,
    make_summary_message,
    starts_round,
    tool_result_text,
    tool_use_ids,
)
from .offload import offload_tool_results
from .options import CompactOptions, EventHandler
from .partition import partition, should_compact
from .policy import PRESETS, STEPS, Policy
from .prune import prune_tool_blocks
from .results import (
    NOT_NEEDED,
    SUMMARY_FAILURES,
    CompactionEvent,
    CompactResult,
    CompactStats,
    OffloadResult,
    Partition,
    PruneResult,
    StepReport,
    TruncateResult,
)
from .retention import extract_identifiers, measure_recall
from .session_compactor import Compactor
from .smart_truncate import smart_truncate
from .summarizers import (
    AnthropicSummarizer,
    CallerSummary,
    ExtractiveSummarizer,
    OpenAISummarizer,
    ScriptedSummarizer,
    Summarizer,
    SummaryRequest,
)
from .summary_quality import StateRecall, state_recall
from .tokens import (
    compact_json,
    configure,
    count_tokens,
    get_encoding,
    message_token_counts,
    message_tokens,
)
from .validation import ensure_valid, validate_messages

__all__ = [
    "NOT_NEEDED",
    "PRESETS",
    "STEPS",
    "SUMMARY_FAILURES",
    "SUMMARY_KEY",
    "SUMMARY_PREFIX",
    "AnthropicSummarizer",
    "ArchiveError",
    "BlobStore",
    "BlobStoreError",
    "Block",
    "CallerSummary",
    "Clock",
    "CompactOptions",
    "CompactResult",
    "CompactStats",
    "CompactionError",
    "CompactionEvent",
    "Compactor",
    "EventHandler",
    "ExclusiveBlobStore",
    "ExtractiveSummarizer",
    "FailureCause",
    "InvalidFilesError",
    "InvalidMessagesError",
    "LocalBlobStore",
    "Message",
    "OffloadResult",
    "OpenAISummarizer",
    "Partition",
    "Policy",
    "PolicyError",
    "Problem",
    "PruneResult",
    "ScriptedSummarizer",
    "StateRecall",
    "StepReport",
    "Summarizer",
    "SummaryError",
    "SummaryRequest",
    "SystemClock",
    "TruncateResult",
    "UnknownEncodingError",
    "alternates",
    "archive_name",
    "blocks_of",
    "compact_json",
    "compact_messages",
    "configure",
    "count_tokens",
    "ensure_valid",
    "errors",
    "expand_path_groups",
    "extract_identifiers",
    "fold_file",
    "fold_files",
    "get_encoding",
    "hard_truncate",
    "is_meta",
    "is_summary_message",
    "make_summary_message",
    "measure_recall",
    "merge_adjacent_roles",
    "message_token_counts",
    "message_tokens",
    "offload_tool_results",
    "partition",
    "prune_tool_blocks",
    "should_compact",
    "smart_truncate",
    "starts_round",
    "state_recall",
    "tool_result_text",
    "tool_use_ids",
    "validate_messages",
]
