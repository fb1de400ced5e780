"""`Compactor`: the stateful engine object for an agent loop. It holds a policy, a
summarizer and the cooldown (docs/behaviour.md#cooldown) for one session that is compacted again and
again (the loop calls it before each model request); each call is one `compact_messages` run.

After a compaction whose summary failed (all its attempts), further attempts are skipped
for `policy.cooldown_seconds` (8 s by default): a skipped call returns `compacted=False`
with reason `cooldown` at once, without asking the summarizer. While cooling down, a
context over the hard limit still gets the chain's truncation fallbacks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from .blobstore import BlobStore
from .clock import Clock, SystemClock
from .flow import compact_messages
from .messages import Message
from .options import CompactOptions, EventHandler
from .partition import should_compact
from .policy import Policy
from .results import SUMMARY_FAILURES, CompactResult, CompactStats
from .summarizers.base import Summarizer
from .summarizers.extractive import ExtractiveSummarizer
from .tokens import count_tokens
from .validation import ensure_valid

__all__ = ["Compactor"]

logger = logging.getLogger("compaction")

_FALLBACKS: Final = ("smart_truncate", "hard_truncate")


class Compactor:
    """Compacts one session repeatedly with a fixed summarizer, honouring the cooldown."""

    def __init__(  # noqa: PLR0913 (public keyword-only settings)
        self,
        policy: Policy | None = None,
        summarizer: Summarizer | None = None,
        *,
        clock: Clock | None = None,
        archive_dir: str | os.PathLike[str] | None = None,
        archive_store: BlobStore | None = None,
        offload_dir: str | os.PathLike[str] | None = None,
        offload_store: BlobStore | None = None,
        session_id: str | None = None,
        failures_before_cooldown: int = 1,
    ) -> None:
        if failures_before_cooldown < 1:
            raise ValueError("failures_before_cooldown must be at least 1")
        self.policy = policy or Policy()
        self.summarizer = summarizer or ExtractiveSummarizer()
        self.clock = clock or SystemClock()
        self.archive_dir = archive_dir
        self.archive_store = archive_store
        self.offload_dir = offload_dir
        self.offload_store = offload_store
        self.session_id = session_id
        self.failures_before_cooldown = failures_before_cooldown
        self.consecutive_failures = 0
        self._cooldown_until: float | None = None

    @property
    def cooldown_remaining(self) -> float:
        """Seconds left in the cooldown (0 when not cooling down)."""
        if self._cooldown_until is None:
            return 0.0
        return max(0.0, self._cooldown_until - self.clock.monotonic())

    def should_compact(self, messages: Sequence[Message]) -> bool:
        """The policy's trigger check (the cooldown is reported by `compact`, not here)."""
        return should_compact(messages, self.policy)

    def compact(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        on_event: EventHandler | None = None,
        force: bool = False,
        trigger: str = "auto",
    ) -> CompactResult:
        """`compact_messages` with this compactor's settings, unless cooling down."""
        if self.cooldown_remaining > 0:
            return self._cooling_down(messages, on_event, trigger)
        result = self._run(messages, self.policy, instructions, on_event, force, trigger)
        if _summary_failed(result):
            self.consecutive_failures += 1
            if self.consecutive_failures >= self.failures_before_cooldown:
                self._cooldown_until = self.clock.monotonic() + self.policy.cooldown_seconds
                logger.warning(
                    "summary failed %d time(s) in a row: cooling down for %.1f s",
                    self.consecutive_failures,
                    self.policy.cooldown_seconds,
                    extra={"session_id": self.session_id, "reason": result.reason},
                )
        elif result.compacted:
            self.consecutive_failures = 0
            self._cooldown_until = None
        return result

    def _cooling_down(
        self, messages: Sequence[Message], on_event: EventHandler | None, trigger: str
    ) -> CompactResult:
        ensure_valid(messages)
        fallbacks = tuple(step for step in self.policy.steps if step in _FALLBACKS)
        tokens = count_tokens(messages, encoding=self.policy.encoding)
        logger.info(
            "compaction skipped: cooling down for %.1f more s",
            self.cooldown_remaining,
            extra={"session_id": self.session_id, "trigger": trigger, "outcome": "cooldown"},
        )
        if fallbacks and self.policy.over_hard_limit(tokens):
            policy = self.policy.replace(steps=fallbacks)
            result = self._run(messages, policy, None, on_event, False, trigger)
            return replace(result, reason="cooldown")
        return CompactResult(
            messages=messages if isinstance(messages, list) else list(messages),
            compacted=False,
            stats=CompactStats(),
            reason="cooldown",
        )

    def _run(
        self,
        messages: Sequence[Message],
        policy: Policy,
        instructions: str | None,
        on_event: EventHandler | None,
        force: bool,
        trigger: str,
    ) -> CompactResult:
        options = CompactOptions(
            summarizer=self.summarizer,
            archive_dir=self.archive_dir,
            archive_store=self.archive_store,
            session_id=self.session_id,
            instructions=instructions,
            on_event=on_event,
            clock=self.clock,
            force=force,
            trigger=trigger,
            offload_dir=self.offload_dir,
            offload_store=self.offload_store,
        )
        return compact_messages(messages, policy, options=options)


def _summary_failed(result: CompactResult) -> bool:
    return any(
        event.phase == "rollback" and event.reason in SUMMARY_FAILURES for event in result.events
    )
