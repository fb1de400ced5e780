"""The full history as a tree: messages, and compaction markers that fold their ranges.

A succeeded compaction folds the original messages `first_seq..last_seq` behind a one-line
marker; the markers nest as the one compaction tree says (sessions_app/compaction_tree.py,
which the API's history uses too). Reverted and failed compactions fold nothing (they are
listed in the compaction log); a failed attempt is also drawn as a red marker row at the top
level, in its place in time, with its underlying error (not part of the API's tree).

Histories can be long, so a level of the tree is shown a window at a time: every marker of the
level in its place, the newest messages of the top level (the oldest inside a marker), and the
other messages folded into gap rows between the markers that load when opened.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from sessions_app.compaction_tree import CompactionTree
from sessions_app.models import Compaction, Message, Session
from sessions_app.selectors.compactions import session_compactions
from sessions_app.selectors.history import HistoryLevel, message_times
from sessions_app.selectors.subagents import SubagentLink, subagent_links

from .blocks import MessageView, build_message_views

__all__ = [
    "PAGE_SIZE",
    "FailedMarkerView",
    "GapView",
    "HistoryWindow",
    "MarkerTree",
    "MarkerView",
    "history_window",
    "parse_bound",
]

#: Messages per window; a window may hold one more to keep a tool call with its result.
PAGE_SIZE: Final = 40

#: Gaps of at most this many messages are drawn, not folded.
SMALL_GAP: Final = 3

Direction = Literal["newest", "oldest"]


@dataclass(frozen=True)
class MarkerView:
    """A compaction marker row, as drawn in its place in the timeline."""

    compaction: Compaction
    depth: int
    child_count: int
    kind: str = "marker"

    @property
    def number(self) -> int:
        """The compaction's number in its session."""
        return self.compaction.number

    @property
    def saved_ratio(self) -> float | None:
        """Fraction of tokens the compaction saved (0.8 means 80% fewer), or None."""
        c = self.compaction
        if c.tokens_before <= 0:
            return None
        return max(0.0, 1 - c.tokens_after / c.tokens_before)

    @property
    def original_count(self) -> int:
        """How many original messages the marker folds."""
        c = self.compaction
        if c.first_seq is None or c.last_seq is None:
            return 0
        return c.last_seq - c.first_seq + 1


@dataclass(frozen=True)
class FailedMarkerView:
    """A failed compaction attempt, drawn as a red marker row in its place in time.

    It folds nothing; it shows why the attempt failed: the failure reason and the
    underlying error recorded in `details["error"]`
    (sessions_app/services/compacting/failure_errors.py).
    """

    compaction: Compaction
    kind: str = "failed"

    @property
    def number(self) -> int:
        """The compaction's number in its session."""
        return self.compaction.number

    @property
    def error(self) -> Mapping[str, Any]:
        """The recorded error (type, message, status, attempts), or an empty mapping."""
        details = self.compaction.details
        error = details.get("error") if isinstance(details, Mapping) else None
        return error if isinstance(error, Mapping) else {}

    @property
    def reason(self) -> str:
        """The stable failure reason (e.g. `summarizer_error`), or the error's own."""
        return self.compaction.failure_reason or str(self.error.get("reason") or "")

    @property
    def message(self) -> str:
        """The error's message when it says more than the reason ("" otherwise)."""
        message = str(self.error.get("message") or "")
        return "" if message == self.reason else message


class MarkerTree(CompactionTree):
    """The shared marker tree (sessions_app/compaction_tree.py) with the page's marker rows."""

    @classmethod
    def for_session(cls, session: Session) -> MarkerTree:
        """The tree of one session's compactions."""
        return cls(session_compactions(session))

    def path_to(self, compaction: Compaction) -> list[int]:
        """The numbers of the markers enclosing `compaction`, outermost first, then its own."""
        path = [compaction.number]
        parent = self.parent(compaction)
        while parent is not None and len(path) <= len(self.active):
            path.append(parent.number)
            parent = self.parent(parent)
        return path[::-1]

    @property
    def failed(self) -> list[Compaction]:
        """The failed attempts (drawn as top-level rows, never in the tree), by number."""
        everything = sorted(self.by_number.values(), key=lambda c: c.number)
        return [c for c in everything if c.status == Compaction.Status.FAILED]

    def marker(self, compaction: Compaction) -> MarkerView:
        """The marker row of `compaction`."""
        return MarkerView(
            compaction, self.depth(compaction), child_count=len(self.children(compaction))
        )


@dataclass(frozen=True)
class GapView:
    """A run of messages between two markers, folded until asked for (a 'load' row).

    `lo` and `hi` are the exclusive bounds of the run (message seqs or marker keys);
    `first_seq`..`last_seq` and `count` describe the messages inside it.
    """

    lo: float
    hi: float
    count: int
    first_seq: int
    last_seq: int
    kind: str = "gap"

    @property
    def lo_param(self) -> str:
        """`lo` for a URL."""
        return _bound(self.lo)

    @property
    def hi_param(self) -> str:
        """`hi` for a URL."""
        return _bound(self.hi)


def _bound(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


Item = MessageView | MarkerView | FailedMarkerView | GapView


@dataclass
class HistoryWindow:
    """Part of one level of the tree, in timeline order (oldest first).

    Every marker of the level within the bounds is present; of the messages, `limit` are
    drawn (the newest at the top level, the oldest inside a marker) and the others are
    folded into gap rows between the markers.
    """

    items: list[Item]
    parent: Compaction | None
    direction: Direction
    markers: list[MarkerView] = field(default_factory=list)

    @property
    def gaps(self) -> list[GapView]:
        """The folded runs of this window."""
        return [item for item in self.items if isinstance(item, GapView)]


def _marker_keys(session: Session, markers: Sequence[Compaction]) -> list[tuple[float, Compaction]]:
    """Each marker's place in the timeline: its first message, or its time when rangeless."""
    keyed = [(float(c.first_seq), c) for c in markers if c.first_seq is not None]
    return keyed + _time_keys(session, [c for c in markers if c.first_seq is None])


def _time_keys(session: Session, markers: Sequence[Compaction]) -> list[tuple[float, Compaction]]:
    """Each marker's place by its time: just after the last message created before it."""
    if not markers:
        return []
    times = message_times(session)
    stamps: list[datetime] = [t for t, _ in times]
    keyed = []
    for compaction in markers:
        index = bisect_right(stamps, compaction.created_at)
        keyed.append(((times[index - 1][1] + 0.5) if index else -0.5, compaction))
    return keyed


def _level_markers(
    session: Session,
    tree: MarkerTree,
    parent: Compaction | None,
    lo: float | None,
    hi: float | None,
) -> list[tuple[float, MarkerView | FailedMarkerView]]:
    """The marker rows of one level within (lo, hi), keyed by their place in the timeline.

    A failed attempt is placed by its time, at the top level only: its range (when it
    recorded one) was never folded, so the messages stay where they were.
    """
    keyed: list[tuple[float, MarkerView | FailedMarkerView]] = [
        (key, tree.marker(c)) for key, c in _marker_keys(session, tree.children(parent))
    ]
    if parent is None:
        keyed += [(key, FailedMarkerView(c)) for key, c in _time_keys(session, tree.failed)]
    return [(k, row) for k, row in keyed if (lo is None or k > lo) and (hi is None or k < hi)]


def _answers_tools(message: Message) -> bool:
    content = message.content
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def parse_bound(value: str | None) -> float | None:
    """A window bound from a URL parameter (None when absent or not a number)."""
    if value is None:
        return None
    try:
        bound = float(value)
    except ValueError:
        return None
    return bound if math.isfinite(bound) else None


def _take(
    level: HistoryLevel, lo: float | None, hi: float | None, direction: Direction, limit: int
) -> tuple[list[Message], bool]:
    """`limit` messages from the preferred end, never ending between a tool call and its
    result; and whether any are left."""
    rows = level.edge(lo, hi, newest=direction == "newest", count=limit + 2)
    window = rows[:limit]
    if len(rows) > limit:
        edge = window[-1] if direction == "newest" else rows[limit]
        if _answers_tools(edge):
            window.append(rows[limit])
    more = len(rows) > len(window)
    if direction == "newest":
        window.reverse()
    return window, more


def _gaps(
    level: HistoryLevel, lo: float | None, hi: float | None, keys: list[float]
) -> list[GapView]:
    """The untaken messages in (lo, hi), split into runs by the marker keys."""
    edges = [lo, *sorted(k for k in keys if (lo is None or k > lo) and (hi is None or k < hi)), hi]
    gaps = []
    for low, high in itertools.pairwise(edges):
        run = level.run(low, high)
        if run is not None:
            gaps.append(
                GapView(
                    lo=low if low is not None else run.first_seq - 1,
                    hi=high if high is not None else run.last_seq + 1,
                    count=run.count,
                    first_seq=run.first_seq,
                    last_seq=run.last_seq,
                )
            )
    return gaps


def _folded(
    level: HistoryLevel,
    lo: float | None,
    hi: float | None,
    keys: list[float],
    links: Mapping[str, SubagentLink],
) -> list[tuple[float, Item]]:
    """The untaken messages in (lo, hi) as gap rows; a small gap's messages are drawn."""
    items: list[tuple[float, Item]] = []
    small: list[Message] = []
    for gap in _gaps(level, lo, hi, keys):
        if gap.count <= SMALL_GAP:
            # Not worth a row of its own: draw its few messages.
            small += level.messages(gap.lo, gap.hi)
        else:
            items.append((gap.lo + 0.25, gap))
    items += [(float(v.seq or 0), v) for v in build_message_views(small, subagents=links)]
    return items


def history_window(
    session: Session,
    *,
    tree: MarkerTree | None = None,
    parent: Compaction | None = None,
    lo: float | None = None,
    hi: float | None = None,
    limit: int = PAGE_SIZE,
    subagents: Mapping[str, SubagentLink] | None = None,
) -> HistoryWindow:
    """A window of the top level (parent None) or of a marker's originals, within (lo, hi).

    All markers of the level in the bounds are included, in their places; `limit` messages
    are drawn (the newest at the top level, the oldest inside a marker) and the rest fold
    into gap rows that load on demand. A window never separates a tool call from its result.
    Tool calls that started a subagent session link to it (`subagents`, read when None).
    """
    tree = tree or MarkerTree.for_session(session)
    links = subagent_links(session) if subagents is None else subagents
    direction: Direction = "newest" if parent is None else "oldest"
    children = tree.children(parent)
    level = HistoryLevel(session, parent, children)
    window, more = _take(level, lo, hi, direction, limit)
    keyed = _level_markers(session, tree, parent, lo, hi)
    items: list[tuple[float, Item]] = [
        (float(view.seq if view.seq is not None else 0), view)
        for view in build_message_views(window, subagents=links)
    ]
    markers = [row for _, row in keyed if isinstance(row, MarkerView)]
    items += keyed
    if more and window:
        rest_lo: float | None
        rest_hi: float | None
        if direction == "newest":
            rest_lo, rest_hi = lo, float(window[0].seq)
        else:
            rest_lo, rest_hi = float(window[-1].seq), hi
        keys = [key for key, _ in keyed]
        items += _folded(level, rest_lo, rest_hi, keys, links)
    items.sort(key=lambda pair: pair[0])
    return HistoryWindow(
        items=[item for _, item in items], parent=parent, direction=direction, markers=markers
    )
