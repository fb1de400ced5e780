"""The token timeline: full-history tokens and runtime tokens over a session, as SVG geometry.

The x axis is the message sequence. The full history only grows; the runtime context grows
with it until a compaction drops it to the compaction's `tokens_after`. Each drop is marked.
Coordinates are computed here so the template only prints numbers (no inline style: CSP).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import accumulate
from typing import Final

from sessions_app.models import Compaction, Session
from sessions_app.selectors.compactions import newest_compaction_number, session_compactions
from sessions_app.selectors.history import first_seq_after, message_tokens
from sessions_app.services.sessions.overhead import session_overhead

from .caching import session_cached
from .limits import Limits
from .thresholds import ThresholdSegment, threshold_segments

__all__ = ["ChartMarker", "ChartTick", "TimelineChart", "token_timeline"]

WIDTH: Final = 720
HEIGHT: Final = 206
LEFT: Final = 52
RIGHT: Final = 14
TOP: Final = 36
BOTTOM: Final = 26
#: At most this many message points per line (drops are always kept).
MAX_POINTS: Final = 480


@dataclass(frozen=True)
class ChartTick:
    """An axis tick: its position and label."""

    position: float
    label: str


@dataclass(frozen=True)
class ChartMarker:
    """A compaction's drop: where it is, how far the runtime line fell, and its label.

    A `failed` attempt is marked in red where it ran; the runtime line does not fall."""

    number: int
    x: float
    y_before: float
    y_after: float
    tokens_before: int
    tokens_after: int
    trigger: str
    reverted: bool
    label_y: float = 0.0
    failed: bool = False
    failure_reason: str = ""
    #: False when every label row is taken near this drop: its label would cover another
    #: (the drop keeps its line, its link and its title).
    labelled: bool = True

    @property
    def hit_x(self) -> float:
        """Left edge of the drop's invisible tap target, `HIT_WIDTH` wide around the line."""
        return round(self.x - HIT_WIDTH / 2, 1)

    @property
    def hit_y(self) -> float:
        """Top of the tap target: the top of the drop's label."""
        return self.label_y - LABEL_ROW

    @property
    def hit_height(self) -> float:
        """Height of the tap target: from its label down to the plot's bottom."""
        return HEIGHT - BOTTOM - self.hit_y

    #: An offload's record: no marker in the history, so it links to the log.
    offload: bool = False


@dataclass(frozen=True)
class TimelineChart:
    """Everything the SVG template needs."""

    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int
    full_points: str
    runtime_points: str
    runtime_area: str
    limit_y: float
    threshold_y: float
    y_ticks: list[ChartTick]
    x_ticks: list[ChartTick]
    markers: list[ChartMarker]
    full_total: int
    runtime_total: int
    full_off_scale: bool
    message_count: int
    #: The threshold over time: one stretch per threshold in force (thresholds.py).
    thresholds: list[ThresholdSegment] = dataclasses.field(default_factory=list)
    #: Tokens of the system prompt and tools counted in both lines (a proxied session's).
    reserved: int = 0

    @property
    def threshold_steps(self) -> list[tuple[float, float, float]]:
        """(x, y from, y to) of each vertical step between two thresholds."""
        return [
            (b.x1, a.y, b.y) for a, b in zip(self.thresholds, self.thresholds[1:], strict=False)
        ]

    @property
    def threshold_text(self) -> str:
        """Every stretch of the threshold line in words (the chart's accessible name)."""
        return "; ".join(t.description for t in self.thresholds) + ("." if self.thresholds else "")

    @property
    def threshold_changes(self) -> bool:
        """True when the threshold was not the same all along."""
        return len(self.thresholds) > 1

    @property
    def plot_width(self) -> int:
        """Width of the plot area."""
        return self.plot_right - self.plot_left

    @property
    def plot_height(self) -> int:
        """Height of the plot area."""
        return self.plot_bottom - self.plot_top

    @property
    def empty(self) -> bool:
        """True when the session has no messages yet."""
        return self.message_count == 0


def short_tokens(value: float) -> str:
    """12345 -> '12.3k', 2_100_000 -> '2.1M'."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M".replace(".0M", "M")
    if value >= 1000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    return str(int(value))


@dataclass
class _Point:
    index: float
    full: int
    runtime: int


def _drop_positions(
    session: Session, compactions: list[Compaction]
) -> list[tuple[int, Compaction]]:
    """After how many messages each compaction ran (by time, and never before its range)."""
    positions = []
    for compaction in compactions:
        after = first_seq_after(session, compaction.created_at)
        position = after if after is not None else session.message_count
        if compaction.last_seq is not None:
            position = max(position, compaction.last_seq + 1)
        positions.append((position, compaction))
    positions.sort(key=lambda pair: (pair[0], pair[1].created_at, pair[1].number))
    return positions


def _series(
    tokens: list[int], drops: list[tuple[int, Compaction]], reserved: int = 0
) -> tuple[list[_Point], list[tuple[_Point, _Point, Compaction]]]:
    """Points of both lines in order (thinned), and the before/after points of each drop.
    `reserved`: tokens sent beside the messages on every call (a proxied session's system
    prompt and tools), added to both lines as the threshold counts them."""
    count = len(tokens)
    full = list(accumulate(tokens, initial=reserved))
    at_position: dict[int, list[Compaction]] = {}
    for position, compaction in drops:
        at_position.setdefault(min(position, count), []).append(compaction)
    step = max(1, count // MAX_POINTS)
    indexes = sorted({*range(0, count + 1, step), count, *at_position})
    points: list[_Point] = []
    events: list[tuple[_Point, _Point, Compaction]] = []
    saved = 0
    for index in indexes:
        here = at_position.get(index, [])
        if not here:
            points.append(_Point(index, full[index], full[index] - saved))
            continue
        for compaction in here:
            before = _Point(index, full[index], full[index] - saved)
            if compaction.status == Compaction.Status.SUCCEEDED:
                saved += max(0, before.runtime - reserved - int(compaction.tokens_after))
            after = _Point(index, full[index], full[index] - saved)
            points += [before, after]
            events.append((before, after, compaction))
    return points, events


#: Labels of drops closer than this (in SVG units) are stacked instead of overlapping.
LABEL_GAP: Final = 22
LABEL_ROWS: Final = 3
#: Height of a row of drop labels: more than a 10-unit label's box, so rows never touch.
LABEL_ROW: Final = 12
#: Width of a drop's tap target (SVG units; the chart is never drawn smaller than its
#: viewBox on a phone, static/css/ctxweb.css): 24 px, the WCAG 2.2 minimum.
HIT_WIDTH: Final = 24


def _stagger_labels(markers: list[ChartMarker]) -> list[ChartMarker]:
    """Each marker with its label's y: one row above the plot, stacked when crowded."""
    placed: list[ChartMarker] = []
    row_ends: list[float] = []  # x of the last label in each row
    for marker in sorted(markers, key=lambda m: m.x):
        row = next((i for i, end in enumerate(row_ends) if marker.x - end >= LABEL_GAP), None)
        if row is None and len(row_ends) < LABEL_ROWS:
            row = len(row_ends)
            row_ends.append(marker.x)
        if row is None:  # every row is taken here: no label rather than one over another
            placed.append(dataclasses.replace(marker, label_y=TOP - 4, labelled=False))
            continue
        row_ends[row] = marker.x
        placed.append(dataclasses.replace(marker, label_y=TOP - 4 - LABEL_ROW * row))
    return placed


def token_timeline(session: Session, limits: Limits) -> TimelineChart:
    """The chart of one session (cached until the session changes)."""
    return session_cached(
        session,
        "timeline",
        lambda: _build(session, limits),
        limits.context_limit,
        limits.trigger_ratio,
        newest_compaction_number(session),  # a failed attempt changes nothing else
    )


@dataclass(frozen=True)
class _Scale:
    """Chart coordinates of a message index (x) and a token count (y)."""

    count: int
    y_max: float

    @property
    def bottom(self) -> int:
        """The y of the plot's bottom edge."""
        return HEIGHT - BOTTOM

    def x(self, index: float) -> float:
        """The x of message `index` (of `count`)."""
        return round(LEFT + (WIDTH - LEFT - RIGHT) * index / self.count, 1)

    def y(self, value: float) -> float:
        """The y of `value` tokens (a little above the top at most)."""
        plot_h = HEIGHT - TOP - BOTTOM
        return round(self.bottom - plot_h * min(value, self.y_max * 1.02) / self.y_max, 1)


def _build(session: Session, limits: Limits) -> TimelineChart:
    rows = message_tokens(session)
    compactions = session_compactions(session)  # failed ones are marked, without a drop
    reserved = session_overhead(session).total
    points, events = _series([r[1] for r in rows], _drop_positions(session, compactions), reserved)
    n = max(1, len(rows))
    runtime_max = max((p.runtime for p in points), default=0)
    full_max = points[-1].full if points else 0
    recorded = max((int(c.threshold_tokens or 0) for c in compactions), default=0)
    top = max(limits.context_limit, runtime_max, recorded)
    scale = _Scale(count=n, y_max=top * 1.08 or 1)
    x, y, bottom = scale.x, scale.y, scale.bottom
    runtime_points = " ".join(f"{x(p.index)},{y(p.runtime)}" for p in points)
    x_tick_count = min(5, len(rows))
    return TimelineChart(
        width=WIDTH,
        height=HEIGHT,
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        plot_top=TOP,
        plot_bottom=bottom,
        full_points=" ".join(f"{x(p.index)},{y(p.full)}" for p in points),
        runtime_points=runtime_points,
        runtime_area=f"{x(0)},{bottom} {runtime_points} {x(points[-1].index)},{bottom}",
        limit_y=y(limits.context_limit),
        threshold_y=y(limits.threshold),
        y_ticks=[
            ChartTick(y(limits.context_limit * t), short_tokens(limits.context_limit * t))
            for t in (0.25, 0.5, 0.75, 1.0)
        ],
        x_ticks=[
            ChartTick(x(n * i / x_tick_count), str(round(n * i / x_tick_count)))
            for i in range(1, x_tick_count + 1)
        ],
        markers=_stagger_labels([_marker(scale, *event) for event in events]),
        full_total=full_max,
        runtime_total=int(session.context_tokens) + reserved,
        reserved=reserved,
        full_off_scale=full_max > scale.y_max,
        message_count=len(rows),
        thresholds=threshold_segments(
            [(x(before.index), compaction) for before, _, compaction in events],
            limits.threshold,
            left=LEFT,
            right=WIDTH - RIGHT,
            y=y,
        ),
    )


def _marker(scale: _Scale, before: _Point, after: _Point, compaction: Compaction) -> ChartMarker:
    """The drop of `compaction`, from the runtime point `before` to `after`."""
    return ChartMarker(
        number=compaction.number,
        x=scale.x(before.index),
        y_before=scale.y(before.runtime),
        y_after=scale.y(after.runtime),
        tokens_before=int(compaction.tokens_before),
        tokens_after=int(compaction.tokens_after),
        trigger=compaction.trigger,
        reverted=compaction.status == Compaction.Status.REVERTED,
        failed=compaction.status == Compaction.Status.FAILED,
        failure_reason=compaction.failure_reason,
        offload=compaction.is_offload,
    )
