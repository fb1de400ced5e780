"""Now vs before: the runtime context set beside the full history it stands for.

Rows run in timeline order, like a diff. An unchanged run of messages is one folded row; a
message whose runtime content was transformed (offloaded, truncated) shows both versions; a
summary shows the span of original messages it replaced; history messages the model no longer
sees at all (dropped, not summarized) are marked as such.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import accumulate
from typing import Any, Final

from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.selectors.compactions import session_compactions
from sessions_app.selectors.entries import compare_entries, entries_with_messages
from sessions_app.selectors.history import message_tokens

from .blocks import MessageView, build_message_views

__all__ = ["CompareRow", "CompareView", "compare_view"]

#: Changed entries drawn one by one; beyond this they fold into runs like unchanged ones.
MAX_CHANGED_ROWS: Final = 200


@dataclass
class CompareRow:
    """One aligned row: `kind` is same, changed, summary or dropped."""

    kind: str
    first_seq: int | None
    last_seq: int | None
    count: int
    tokens_now: int
    tokens_before: int
    compaction: Compaction | None = None
    now: MessageView | None = None
    before: MessageView | None = None
    position: int = 0
    entry_pk: int | None = None

    @property
    def delta(self) -> int:
        """Tokens saved (positive) by this row."""
        return self.tokens_before - self.tokens_now


@dataclass
class CompareView:
    """All rows and the totals on both sides."""

    rows: list[CompareRow] = field(default_factory=list)
    tokens_now: int = 0
    entries_now: int = 0
    tokens_before: int = 0
    messages_before: int = 0

    @property
    def saved(self) -> int:
        """Tokens the runtime context saves against the full history."""
        return self.tokens_before - self.tokens_now

    @property
    def saved_ratio(self) -> float:
        """Saved tokens as a fraction of the full history."""
        return self.saved / self.tokens_before if self.tokens_before else 0.0


class _History:
    """Prefix sums over the full history, to total any seq range in O(log n)."""

    def __init__(self, session: Session) -> None:
        rows = message_tokens(session)
        self.seqs = [seq for seq, _ in rows]
        self.prefix = [0, *accumulate(tokens for _, tokens in rows)]

    def span(self, first: int, last: int) -> tuple[int, int]:
        """(message count, tokens) of the messages first..last."""
        lo = bisect_left(self.seqs, first)
        hi = bisect_left(self.seqs, last + 1)
        return hi - lo, self.prefix[hi] - self.prefix[lo]

    @property
    def tokens(self) -> int:
        """Tokens of the whole history."""
        return self.prefix[-1]


def _uncovered_runs(seqs: list[int], covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs (first, last) of history seqs that no entry or summary accounts for."""
    covered.sort()
    runs: list[tuple[int, int]] = []
    index = 0
    for seq in seqs:
        while index < len(covered) and covered[index][1] < seq:
            index += 1
        if index < len(covered) and covered[index][0] <= seq <= covered[index][1]:
            continue
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs


@dataclass(frozen=True)
class _EntryAsMessage:
    """A transformed context entry, shaped like its message for build_message_views."""

    role: str
    content: Any
    message: Message
    token_count: int

    @property
    def seq(self) -> int:
        return self.message.seq

    @property
    def extra(self) -> Any:
        return self.message.extra

    @property
    def created_at(self) -> datetime:
        return self.message.created_at


def _fill_changed(rows: list[CompareRow]) -> None:
    """Give each changed row both versions: the entry's content and the original message."""
    wanted = {row.entry_pk: row for row in rows if row.entry_pk is not None}
    if not wanted:
        return
    for entry in entries_with_messages(None, wanted):
        original = entry.message
        if original is None:
            continue
        now_row = _EntryAsMessage(entry.role, entry.content, original, entry.token_count)
        now, before = build_message_views([now_row, original])
        wanted[entry.pk].now, wanted[entry.pk].before = now, before


def _summary_row(
    entry: dict[str, Any], compaction: Compaction | None, history: _History
) -> CompareRow:
    first = compaction.first_seq if compaction else None
    last = compaction.last_seq if compaction else None
    count, before = (0, 0)
    if first is not None and last is not None:
        count, before = history.span(first, last)
    return CompareRow(
        "summary",
        first,
        last,
        count,
        entry["token_count"],
        before,
        compaction=compaction,
        position=entry["position"],
    )


def compare_view(session: Session) -> CompareView:
    """Rows of the runtime context beside the full history, in timeline order."""
    history = _History(session)
    compactions = {c.pk: c for c in session_compactions(session)}
    rows: list[CompareRow] = []
    covered: list[tuple[int, int]] = []
    changed = 0
    entries = compare_entries(session)
    for entry in entries:
        seq = entry["message__seq"]
        if entry["kind"] == ContextEntry.Kind.SUMMARY or seq is None:
            row = _summary_row(entry, compactions.get(entry["compaction_id"] or -1), history)
            if row.first_seq is not None and row.last_seq is not None:
                covered.append((row.first_seq, row.last_seq))
            rows.append(row)
            continue
        covered.append((seq, seq))
        # The first MAX_CHANGED_ROWS changed entries get a row each (with their diff).
        alone = bool(entry["changed"]) and changed < MAX_CHANGED_ROWS
        changed += 1 if alone else 0
        _add_message_row(rows, entry, seq, alone=alone)
    for first, last_seq in _uncovered_runs(history.seqs, covered):
        count, before = history.span(first, last_seq)
        rows.append(CompareRow("dropped", first, last_seq, count, 0, before))
    rows.sort(key=lambda r: (r.first_seq if r.first_seq is not None else -1, r.position))
    _fill_changed(rows)
    return CompareView(
        rows=rows,
        tokens_now=sum(e["token_count"] for e in entries),
        entries_now=len(entries),
        tokens_before=history.tokens,
        messages_before=len(history.seqs),
    )


def _add_message_row(
    rows: list[CompareRow], entry: Mapping[str, Any], seq: int, *, alone: bool
) -> None:
    """Add the row of one message entry: its own row when `alone`, else joined to the
    previous row of the same kind when it continues that row's run of seqs."""
    tokens_now, tokens_before = entry["token_count"], entry["message__token_count"]
    kind = "changed" if entry["changed"] else "same"
    if alone:
        rows.append(
            CompareRow(
                kind,
                seq,
                seq,
                1,
                tokens_now,
                tokens_before,
                position=entry["position"],
                entry_pk=entry["pk"],
            )
        )
        return
    last = rows[-1] if rows else None
    if (
        last is not None
        and last.kind == kind
        and last.entry_pk is None
        and last.last_seq == seq - 1
    ):
        last.last_seq = seq
        last.count += 1
        last.tokens_now += tokens_now
        last.tokens_before += tokens_before
        return
    rows.append(
        CompareRow(kind, seq, seq, 1, tokens_now, tokens_before, position=entry["position"])
    )
