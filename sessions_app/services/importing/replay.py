"""Where an imported session's context entries sat over time, as ctxweb would have placed them.

Message `seq` sits at position 2*seq+1; a compaction's summary takes the first position it
freed, or, when it replaced nothing, the even position just before what it kept (see
docs/architecture.md, "Importing").
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sessions_app.importers import ImportedSession

__all__ = ["Replaced", "Replay", "batches", "head_end", "replay"]

#: One replaced entry: (position, (kind, index), seq or -1 for a summary).
Replaced = tuple[int, tuple[str, int], int]


@dataclass
class Replay:
    """Where every entry sat in the context over time, as ctxweb would have placed it."""

    message_positions: array[int]
    summary_positions: list[int]
    #: Per compaction: the entries it replaced.
    replaced: list[list[Replaced]]
    next_position: int


def replay(imported: ImportedSession, head: int) -> Replay:
    """Where entries sat as the context grew and was compacted (`head`: leading system
    messages, never compacted)."""
    compactions = imported.compactions
    after: dict[int, list[int]] = defaultdict(list)
    for index, compaction in enumerate(compactions):
        after[max(compaction.at_message, head) - 1].append(index)
    count = len(imported.messages)
    positions = array("q", (2 * seq + 1 for seq in range(count)))
    summary_positions = [0] * len(compactions)
    replaced: list[list[Replaced]] = [[] for _ in compactions]
    live: list[Replaced] = []
    for seq in range(-1, count):
        if seq >= head:
            live.append((positions[seq], ("message", seq), seq))
        for index in after.get(seq, []):
            last = compactions[index].last_index
            cut = -1 if last is None else last
            gone = [entry for entry in live if entry[2] <= cut]
            kept = [entry for entry in live if entry[2] > cut]
            replaced[index] = gone
            position = summary_position(gone, kept, seq)
            summary_positions[index] = position
            live = [(position, ("summary", index), -1), *kept]
    return Replay(positions, summary_positions, replaced, 2 * count + 1)


def summary_position(gone: list[Replaced], kept: list[Replaced], seq: int) -> int:
    """The first freed position; with nothing replaced, the even one before what was kept."""
    if gone:
        return gone[0][0]
    return kept[0][0] - 1 if kept else 2 * (seq + 1)


def head_end(imported: ImportedSession) -> int:
    """How many leading system messages the session has."""
    count = 0
    for item in imported.messages:
        if item.role != "system":
            break
        count += 1
    return count


def batches(items: Sequence[Any], size: int) -> Iterator[tuple[int, list[Any]]]:
    """(index of the first item, items) in batches of `size`."""
    batch: list[Any] = []
    start = 0
    for index, item in enumerate(items):
        if not batch:
            start = index
        batch.append(item)
        if len(batch) >= size:
            yield start, batch
            batch = []
    if batch:
        yield start, batch
