"""Where a growing JSON-lines transcript can be cut: lines at which the importer's state is
clean, so that parsing from there gives the same messages as parsing the whole file.

The watcher (services/importing/watching.py) re-reads a transcript from its last cut only: the part
before the newest cut is complete, the part after it may still grow (an assistant reply
streamed line by line, tool results still coming). A cut is a line that starts a new message
while no tool call waits for its result and no compaction boundary waits for its summary:
- Claude Code: a user prompt or the first line of a new API response (sessions_app/importers/
  claude_code.py merges the lines of one response and the results answering it);
- Codex: a user message or the first item of a new model turn after its tool results
  (sessions_app/importers/codex.py). A provider `compaction` item is a boundary too: the
  `compacted` line that follows it is the same compaction (it brings the summary and the
  replacement history), so the complete part ends before the item until that line, or any
  other item, has arrived.

`main` tells whether a Claude Code part has a main-thread message at all: a part made only of
sidechain lines is parsed as a subagent transcript (importers/claude_code_graph.py), so a
session file that starts with sidechain lines must wait for its main thread before it is
stored (services/importing/watching.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sessions_app.importers.provider_compaction import COMPACTION_BLOCK_TYPES

__all__ = ["Cuts", "find_cuts"]

_CODEX_CALLS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
#: Server-side calls: the rollout records no result for them.
_CODEX_SERVER_CALLS = frozenset({"web_search_call", "image_generation_call"})
_CODEX_COMPACTIONS = COMPACTION_BLOCK_TYPES
_CODEX_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)


@dataclass(frozen=True)
class Cuts:
    """`last`: offset of the newest cut (0: none after the start); `end`: where the complete
    part ends (before a trailing compaction boundary still waiting for its summary); `main`:
    a main-thread message was seen (always true for Codex); `rewound`: more than one
    Claude Code main-thread message hangs from a line before the part (`parentUuid` not in
    it): the conversation forked back past the part's start (a rewind), which a part read
    alone cannot place."""

    last: int
    end: int
    main: bool = True
    rewound: bool = False


def find_cuts(data: bytes, format: str) -> Cuts:
    """The newest cut in `data` (complete lines, starting at a cut) and where it ends."""
    state: _Claude | _Codex = _Claude() if format == "claude_code" else _Codex()
    last = 0
    boundary_at: int | None = None
    main = format != "claude_code"
    seen: set[Any] = set()
    roots = 0
    for offset, record in _records(data):
        main = main or _main_message(record)
        if _main_message(record) and record.get("parentUuid") not in seen:
            roots += record.get("parentUuid") is not None
        seen.add(record.get("uuid"))
        clean = state.starts_clean(record)  # always: it also notes the line
        if clean and offset:
            last = offset
        if state.boundary_opened(record):
            boundary_at = offset if boundary_at is None else boundary_at
        if not state.boundary_open:
            boundary_at = None
    return Cuts(last, len(data) if boundary_at is None else boundary_at, main, roots > 1)


def _main_message(record: Mapping[str, Any]) -> bool:
    """True for a Claude Code main-thread message line (not a sidechain, not a summary)."""
    return (
        record.get("type") in {"user", "assistant"}
        and record.get("isSidechain") is not True
        and not record.get("isCompactSummary")
        and isinstance(record.get("message"), Mapping)
    )


def _records(data: bytes) -> Iterator[tuple[int, Mapping[str, Any]]]:
    offset = 0
    for line in data.splitlines(keepends=True):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, Mapping):
            yield offset, record
        offset += len(line)


@dataclass
class _Claude:
    """The part of claude_code_thread.Thread's state that decides whether a line starts clean."""

    mid: str | None = None
    reply: bool = False
    calls: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    boundary_open: bool = False

    def starts_clean(self, record: Mapping[str, Any]) -> bool:
        """Note `record`; True when a parse starting at it matches the whole file's."""
        kind = record.get("type")
        message = record.get("message")
        if record.get("isSidechain") is True or not isinstance(message, Mapping):
            if kind == "system" and record.get("subtype") == "compact_boundary":
                self.boundary_open = True
            return False
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        pending = bool(self.calls - self.answered)
        if kind == "assistant":
            mid = message.get("id") if isinstance(message.get("id"), str) else None
            fresh = not self.reply or mid is None or mid != self.mid
            clean = fresh and not pending and not self.boundary_open
            if fresh:
                self.calls, self.answered = set(), set()
            self.reply, self.mid, self.boundary_open = True, mid, False
            self.calls |= {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            return clean
        if kind != "user":
            return False
        if record.get("isCompactSummary"):
            self.boundary_open = False
            self.reply, self.calls, self.answered = False, set(), set()
            return False
        results = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        if results or (self.reply and pending):
            self.answered |= results
            return False
        clean = not pending and not self.boundary_open
        self.reply, self.calls, self.answered = False, set(), set()
        return clean

    def boundary_opened(self, record: Mapping[str, Any]) -> bool:
        """True when `record` is a compaction boundary (its summary follows)."""
        return record.get("type") == "system" and record.get("subtype") == "compact_boundary"


@dataclass
class _Codex:
    """The part of codex._Rollout's state that decides whether a line starts clean."""

    reply: bool = False
    results: bool = False
    calls: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    boundary_open: bool = False  # a provider compaction item waiting for its `compacted` line

    def starts_clean(self, record: Mapping[str, Any]) -> bool:
        """Note `record`; True when a parse starting at it matches the whole file's."""
        item = record.get("payload") if "payload" in record else record
        if record.get("type") == "compacted":
            self._reset()
            self.boundary_open = False
        if "payload" in record and record.get("type") != "response_item":
            return False
        if not isinstance(item, Mapping):
            return False
        kind = item.get("type")
        # Any other item comes between: the importer no longer joins the two (codex.py).
        self.boundary_open = kind in _CODEX_COMPACTIONS
        pending = bool(self.calls - self.answered)
        if kind in _CODEX_OUTPUTS:
            self.answered.add(str(item.get("call_id")))
            self.results = True
            return False
        if kind == "message" and item.get("role") != "assistant":
            if self.reply and pending and self.results:
                return False
            self._reset()
            return not pending
        if kind in _CODEX_CALLS or kind in _CODEX_SERVER_CALLS or kind in {"reasoning", "message"}:
            open_turn = self.reply and (not self.results or pending)
            clean = not open_turn and not pending
            if not open_turn:
                self._reset()
                self.reply = True
            if kind in _CODEX_CALLS:
                self.calls.add(str(item.get("call_id") or item.get("id")))
            return clean
        return False

    def boundary_opened(self, record: Mapping[str, Any]) -> bool:
        """True when `record` is a provider compaction item (its `compacted` line follows)."""
        item = record.get("payload") if "payload" in record else record
        in_items = "payload" not in record or record.get("type") == "response_item"
        return in_items and isinstance(item, Mapping) and item.get("type") in _CODEX_COMPACTIONS

    def _reset(self) -> None:
        self.reply = self.results = False
        self.calls, self.answered = set(), set()
