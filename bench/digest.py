"""Digests of what `compact_messages` returns on the benchmark histories, to show that a speed
change keeps the results byte-identical.

For both 1M-token histories of bench/compact.py, both of its chains (balanced, summary only),
cold and with `token_counts` given: one line with the SHA-256 (first 16 hex digits) of
`json.dumps(result.messages, sort_keys=True)` and one of every other field of the result
(stats, summary, events, step reports, partition...) but `duration_ms`. The clock is fixed,
so the summary's `created_at` does not change from run to run. Record the lines before a
change, compare after it:

    .venv/bin/python -m bench.digest > /tmp/before.txt      # on the commit before
    .venv/bin/python -m bench.digest | diff /tmp/before.txt - && echo identical

Not one of `python -m bench`'s scripts: it measures nothing. `--smoke`: small histories.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from bench.common import options
from bench.histories import project_session, synthetic_session
from compaction import (
    CompactResult,
    ExtractiveSummarizer,
    Policy,
    compact_messages,
    message_token_counts,
)
from compaction.folding import outline

CHAINS = {"balanced": Policy(), "summary only": Policy(steps=("summary",))}


class FixedClock:
    """Wall time fixed (the summary records it), real monotonic time, no sleeping."""

    def now(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        pass


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def digest(result: CompactResult) -> tuple[str, str]:
    """(hash of the messages, hash of the other fields but the duration)."""
    fields = asdict(result)
    del fields["messages"], fields["duration_ms"]
    return _hash(result.messages), _hash(fields)


def lines(histories: dict[str, list[Any]]) -> Iterator[str]:
    """One line per history, chain and counting (cold, or counts given)."""
    for label, history in histories.items():
        counts = message_token_counts(history)
        for chain, policy in CHAINS.items():
            for counting, given in (("cold", None), ("counts given", counts)):
                outline.clear_outline_cache()
                result = compact_messages(
                    history,
                    policy,
                    summarizer=ExtractiveSummarizer(),
                    force=True,
                    token_counts=given,
                    clock=FixedClock(),
                )
                messages, rest = digest(result)
                yield f"{label} | {chain} | {counting} | messages {messages} | rest {rest}"


def main(argv: Sequence[str] | None = None) -> None:
    args = options(__doc__, argv)
    messages, tokens = (200, 40_000) if args.smoke else (5_000, 1_000_000)
    histories = {
        "issue 14 history": synthetic_session(messages, tokens),
        "real file views": project_session(messages, tokens),
    }
    for line in lines(histories):
        print(line, flush=True)


if __name__ == "__main__":
    main()
