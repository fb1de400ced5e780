"""`CompactOptions`: everything one `compact_messages` run needs besides the messages and
the policy, as one frozen value (docs/architecture.md, "Engine").

The policy says *how much* to compact; the options say *with what and for whom*: the
summarizer, where the originals and offloaded results go, the session, the caller's
instructions, the event observer, the clock, whether to force, the trigger recorded in the
logs and the cached per-message token counts. Every field has the default
`compact_messages` has always used, so `CompactOptions()` is a plain run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .blobstore import BlobStore, LocalBlobStore
from .clock import Clock
from .results import CompactionEvent
from .summarizers.base import Summarizer

__all__ = ["CompactOptions", "EventHandler"]

#: Called with each meta event while compacting (docs/behaviour.md#events).
EventHandler = Callable[[CompactionEvent], None]


@dataclass(frozen=True, kw_only=True)
class CompactOptions:
    """The options of one compaction run; the field names are `compact_messages`' keywords.

    - `summarizer`: makes the summary (default: `ExtractiveSummarizer()`).
    - `archive_dir` / `archive_store`: receives the originals the output no longer holds
      (the store wins when both are given); `archive_sequence` numbers the archive file.
    - `session_id`: names the archive folder and is logged with every record.
    - `instructions`: extra guidance passed to the summarizer.
    - `on_event`: observer of the meta events; its failures are logged, never raised.
    - `clock`: wall clock, monotonic clock and sleep (default: `SystemClock()`).
    - `force`: compact even under the trigger threshold.
    - `trigger`: what asked for this run (`auto`, `manual`, `api`, ...), for the logs.
    - `offload_dir` / `offload_store`: enables the chain's offload step.
    - `token_counts`: one count per message (e.g. cached), so the input is not re-encoded.
    """

    summarizer: Summarizer | None = None
    archive_dir: str | os.PathLike[str] | None = None
    archive_store: BlobStore | None = None
    archive_sequence: int | None = None
    session_id: str | None = None
    instructions: str | None = None
    on_event: EventHandler | None = None
    clock: Clock | None = None
    force: bool = False
    trigger: str = "auto"
    offload_dir: str | os.PathLike[str] | None = None
    offload_store: BlobStore | None = None
    token_counts: Sequence[int] | None = None

    def replace(self, **changes: Any) -> CompactOptions:
        """A copy with `changes` applied (unknown names raise TypeError)."""
        return replace(self, **changes)

    def with_given(self, **values: Any) -> CompactOptions:
        """A copy where each of `values` that is not None replaces its field."""
        given = {name: value for name, value in values.items() if value is not None}
        return replace(self, **given) if given else self

    @property
    def archive_target(self) -> BlobStore | None:
        """Where the originals go: the archive store, else a local store on archive_dir."""
        if self.archive_store is not None:
            return self.archive_store
        return LocalBlobStore(self.archive_dir) if self.archive_dir is not None else None

    @property
    def offloads(self) -> bool:
        """True when an offload directory or store is given (the offload step runs)."""
        return self.offload_dir is not None or self.offload_store is not None
