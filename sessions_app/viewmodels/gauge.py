"""The context gauge: what the runtime context spends its tokens on, like Claude Code's /context.

Runtime tokens are split by kind (system prompt, compaction summaries, conversation messages,
tool calls and results, and a proxied session's tool definitions) and set against the
context limit, with the compaction threshold.
A mixed entry (text and tool blocks) is split by the share of characters of each kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from compaction import blocks_of
from sessions_app.models import ContextEntry, Session
from sessions_app.selectors.entries import entry_tokens
from sessions_app.services.sessions.overhead import session_overhead

from .caching import session_cached
from .limits import Limits

__all__ = ["GRID_CELLS", "GaugeSegment", "GaugeView", "context_gauge"]

#: The gauge grid: one cell per percent of the context limit.
GRID_CELLS: Final = 100
GRID_COLUMNS: Final = 10
#: Pixel pitch of a grid cell in the SVG (the cell itself is a little smaller).
CELL_PITCH: Final = 14
KINDS: Final = (
    ("system", "System prompt"),
    ("summaries", "Summaries"),
    ("messages", "Messages"),
    ("tools", "Tool calls & results"),
    ("tool_definitions", "Tool definitions"),
)


@dataclass(frozen=True)
class GaugeSegment:
    """One kind of runtime tokens (or the free space)."""

    key: str
    label: str
    tokens: int
    share: float


@dataclass(frozen=True)
class GaugeCell:
    """One cell of the grid: its position and what fills it."""

    x: int
    y: int
    key: str
    threshold: bool

    @property
    def px(self) -> int:
        """Left edge in SVG units."""
        return self.x * CELL_PITCH

    @property
    def py(self) -> int:
        """Top edge in SVG units."""
        return self.y * CELL_PITCH


@dataclass(frozen=True)
class GaugeView:
    """The gauge of one session's runtime context."""

    segments: list[GaugeSegment]
    free: GaugeSegment
    total: int
    limits: Limits
    cells: list[GaugeCell]
    entry_count: int

    @property
    def usage(self) -> float:
        """Runtime tokens as a fraction of the context limit."""
        return self.limits.usage(self.total)

    @property
    def grid_width(self) -> int:
        """Width of the grid's SVG viewBox."""
        return GRID_COLUMNS * CELL_PITCH

    @property
    def grid_height(self) -> int:
        """Height of the grid's SVG viewBox."""
        return (GRID_CELLS // GRID_COLUMNS) * CELL_PITCH

    @property
    def over_threshold(self) -> bool:
        """True when the next pre-call check would compact (the engine's answer,
        services/sessions/threshold.py, handed over in `limits`)."""
        return self.limits.over_threshold


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False))


def _tool_share(content: Any, tokens: int) -> int:
    """Tokens of an entry's tool blocks: its tokens split by the characters of each kind."""
    tool = text = 0
    for block in blocks_of({"content": content}):
        if block.get("type") in {"tool_use", "tool_result"}:
            tool += _chars(block.get("input") or block.get("content") or "") + 10
        else:
            text += _chars(block.get("text") or block.get("thinking") or "")
    return round(tokens * tool / (tool + text)) if tool + text else 0


def _tokens_by_kind(session: Session) -> tuple[dict[str, int], int]:
    """Runtime tokens by kind, and the entry count.

    Contents are read as JSON text and only entries that hold tool blocks are decoded, so a
    long context costs one query and a substring test per entry.
    """
    rows = entry_tokens(session)
    totals = dict.fromkeys((key for key, _ in KINDS), 0)
    count = 0
    for kind, role, tokens, is_marked, text in rows:
        count += 1
        if role == "system":
            totals["system"] += tokens
        elif kind == ContextEntry.Kind.SUMMARY or is_marked:
            totals["summaries"] += tokens
        elif text and ('"tool_use"' in text or '"tool_result"' in text):
            tool = _tool_share(json.loads(text), tokens)
            totals["tools"] += tool
            totals["messages"] += tokens - tool
        else:
            totals["messages"] += tokens
    return totals, count


def _cells(segments: Iterable[GaugeSegment], limits: Limits) -> list[GaugeCell]:
    """Cells in reading order: each kind gets its share of the grid (at least one cell)."""
    keys: list[str] = []
    for segment in segments:
        if segment.tokens <= 0:
            continue
        wanted = max(1, round(segment.share * GRID_CELLS))
        keys += [segment.key] * min(wanted, GRID_CELLS - len(keys))
    keys += ["free"] * (GRID_CELLS - len(keys))
    threshold_cell = min(GRID_CELLS - 1, int(limits.trigger_ratio * GRID_CELLS))
    return [
        GaugeCell(i % GRID_COLUMNS, i // GRID_COLUMNS, key, i == threshold_cell)
        for i, key in enumerate(keys)
    ]


def context_gauge(session: Session, limits: Limits) -> GaugeView:
    """The gauge of `session` (cached per context revision: a sum, not a re-read)."""
    totals, count = session_cached(
        session, "gauge", lambda: _tokens_by_kind(session), session.context_entry_count
    )
    # A proxied session's system prompt and tool definitions (services/sessions/overhead.py).
    overhead = session_overhead(session)
    totals = {**totals, "tool_definitions": totals.get("tool_definitions", 0) + overhead.tools}
    totals["system"] += overhead.system
    total = sum(totals.values())
    limit = limits.context_limit
    segments = [
        GaugeSegment(key, label, totals[key], totals[key] / limit if limit else 0.0)
        for key, label in KINDS
    ]
    free_tokens = max(0, limit - total)
    free = GaugeSegment("free", "Free space", free_tokens, free_tokens / limit if limit else 0.0)
    return GaugeView(
        segments=segments,
        free=free,
        total=total,
        limits=limits,
        cells=_cells(segments, limits),
        entry_count=count,
    )
