"""The extractive summary's fitting of commit 5f842ca, kept verbatim as the oracle of the
equivalence tests (tests/compaction/test_extractive_equivalence.py): the faster
`compaction.summarizers.summary_fit` must render the same text.

Fitting the extractive summary's lines into `max_tokens` (tiktoken), section by section.

Key identifiers come first, then each section's essential lines (the goal, the newest
request, state, todos, decisions, errors) get its share of the budget, best priority then
newest first. Files are identifiers to keep: the best have lines of their own, the next are
listed compactly on one line (`OLDER_FILES`), within the files' share and then what the
others left. The rest (older requests, each tool call) get what remains, by priority.
What does not fit is said, not hidden: each section that lost lines ends with a note
counting them (`dropped_note`), including what earlier summaries had dropped already, so a
summary of summaries says how much it stands for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Final, NamedTuple

from compaction.summarizers.prompt import SECTIONS
from compaction.tokens import text_counter

__all__ = [
    "DROPPED_NOTE",
    "FILES",
    "KEY_IDENTIFIERS",
    "OLDER_FILES",
    "Line",
    "dedupe",
    "fit",
]

GOALS, FILES, TOOLS, STATE, ERRORS = SECTIONS
#: Heading of the section that lists identifiers the retention check asked to keep.
KEY_IDENTIFIERS: Final = "Key identifiers"
#: The line that lists file paths whose own lines were left out, newest first.
OLDER_FILES: Final = "- Older files, details left out: "
#: The note ending a section that lost lines (parsed back by `summary_merge`).
DROPPED_NOTE: Final = re.compile(r"^- \((\d+) older entr(?:y|ies) left out for space\)$")

#: Share of the budget each section may fill before leftovers are shared out.
_SHARES: Final = {GOALS: 0.25, FILES: 0.3, TOOLS: 0.1, STATE: 0.15, ERRORS: 0.2}
_NOTE_RESERVE: Final = 12  # tokens set aside per section for its note
#: Lines of this priority or better share the budget by section before the files are
#: listed; the rest (older requests, each tool call) get what is left, best first.
_ESSENTIAL: Final = 2
_MISSES: Final = 50


class Line(NamedTuple):
    """One summary line: its section, priority (lower is kept first) and position in the
    span (newer lines are kept first within a priority); `path` for a file's line."""

    section: str
    text: str
    priority: int
    order: float
    path: str | None = None


def dropped_note(count: int) -> str:
    """The note of a section that lost `count` lines."""
    return f"- ({count} older {'entry' if count == 1 else 'entries'} left out for space)"


def dedupe(lines: Sequence[Line]) -> list[Line]:
    """`lines` without repeats (same section and text): the best priority, newest position."""
    seen: dict[tuple[str, str], int] = {}
    kept: list[Line] = []
    for line in lines:
        key = (line.section, line.text)
        if key in seen:
            previous = kept[seen[key]]
            kept[seen[key]] = Line(
                line.section,
                line.text,
                min(line.priority, previous.priority),
                max(line.order, previous.order),
                line.path,
            )
            continue
        seen[key] = len(kept)
        kept.append(line)
    return kept


def fit(
    lines: Sequence[Line],
    max_tokens: int,
    encoding: str | None,
    dropped_before: Mapping[str, int] | None = None,
) -> str:
    """Render the lines that fit in `max_tokens` (module doc). Lines are only encoded when
    they are considered. `dropped_before`: lines per section earlier summaries left out."""
    count = text_counter(encoding)
    costs: dict[int, int] = {}

    def cost(index: int) -> int:
        if index not in costs:
            costs[index] = count(lines[index].text) + 1
        return costs[index]

    sections = _rendered_sections(lines)
    fixed = sum(_count(f"{section}:\n- none\n", encoding) + _NOTE_RESERVE for section in sections)
    budget = max_tokens - fixed
    ranked = sorted(range(len(lines)), key=lambda i: (lines[i].priority, -lines[i].order))
    chosen: set[int] = set()
    required = [i for i in ranked if lines[i].section == KEY_IDENTIFIERS]
    spent = _take(required, budget, cost, chosen)
    shared = budget - spent
    files = _Files(lines, [i for i in ranked if lines[i].path is not None], encoding)
    for section, share in _SHARES.items():
        if section == FILES:
            spent += files.take(int(shared * share), cost, chosen)
        candidates = [
            i
            for i in ranked
            if lines[i].section == section
            and lines[i].priority <= _ESSENTIAL
            and i not in files.all
        ]
        spent += _take(candidates, int(shared * share), cost, chosen)
    spent += files.list_more(budget - spent)
    rest = [i for i in ranked if i not in chosen and i not in files.all]
    spent += _take(rest, budget - spent, cost, chosen)
    layout = _Layout(lines, sections, dict(dropped_before or {}))
    older = files.older
    text = layout.render(chosen, older)
    while count(text) > max_tokens and (chosen or older):
        if older:
            older.pop()
        else:
            chosen.discard(max(chosen, key=lambda i: (lines[i].priority, -lines[i].order)))
        text = layout.render(chosen, older)
    return text


class _Files:
    """The file lines: the best have a line of their own, the next are listed on the
    `OLDER_FILES` line (a path costs less than a line), so more paths fit."""

    def __init__(self, lines: Sequence[Line], ranked: list[int], encoding: str | None) -> None:
        self.lines = lines
        self.ranked = ranked
        self.all = set(ranked)
        self.costs = [_count(str(lines[i].path), encoding) + 1 for i in ranked]
        self.header = _count(OLDER_FILES, encoding) + 1
        self.older: list[str] = []
        self.listed = 0  # ranked[:full] have lines, ranked[full:listed] are on the list
        self.full = 0

    def take(self, allowance: int, cost: Callable[[int], int], chosen: set[int]) -> int:
        """Lines for the best files while the rest can still be listed; the rest listed."""
        listed_cost = self.header + sum(self.costs)
        used = 0
        for position, index in enumerate(self.ranked):
            listed_cost -= self.costs[position]
            rest = listed_cost if position + 1 < len(self.ranked) else 0
            if used + cost(index) + rest > allowance:
                break
            chosen.add(index)
            used += cost(index)
            self.full = position + 1
        self.listed = self.full
        return used + self.list_more(allowance - used)

    def list_more(self, room: int) -> int:
        """List the next files' paths while they fit `room` tokens; the tokens used."""
        used = 0 if self.older else self.header
        if self.listed >= len(self.ranked) or used >= room:
            return 0
        start = len(self.older)
        while self.listed < len(self.ranked) and used + self.costs[self.listed] <= room:
            self.older.append(str(self.lines[self.ranked[self.listed]].path))
            used += self.costs[self.listed]
            self.listed += 1
        return used if len(self.older) > start else 0


@lru_cache(maxsize=8192)
def _count(text: str, encoding: str | None) -> int:
    """Tokens of a path or a heading: the same ones recur in every summary of a run."""
    return text_counter(encoding)(text)


def _take(
    candidates: Sequence[int], allowance: int, cost: Callable[[int], int], chosen: set[int]
) -> int:
    """Choose candidates in order while they fit `allowance`; return the tokens used.

    Gives up after `_MISSES` candidates in a row that do not fit, so a long span costs a
    bounded number of encodes once its budget is nearly spent.
    """
    used = 0
    misses = 0
    for index in candidates:
        if allowance - used <= 1 or misses >= _MISSES:
            break
        if used + cost(index) <= allowance:
            chosen.add(index)
            used += cost(index)
            misses = 0
        else:
            misses += 1
    return used


def _rendered_sections(lines: Sequence[Line]) -> list[str]:
    sections = list(SECTIONS)
    if any(line.section == KEY_IDENTIFIERS for line in lines):
        sections.append(KEY_IDENTIFIERS)
    return sections


class _Layout:
    """Renders chosen lines, the older files' line and each section's dropped note."""

    def __init__(
        self, lines: Sequence[Line], sections: Sequence[str], dropped_before: dict[str, int]
    ) -> None:
        self.lines = lines
        self.sections = sections
        self.dropped_before = dropped_before
        self.members: dict[str, list[int]] = {section: [] for section in sections}
        for index, line in enumerate(lines):
            self.members.setdefault(line.section, []).append(index)

    def render(self, chosen: set[int], older: Sequence[str]) -> str:
        listed = set(older)
        parts = []
        for section in self.sections:
            members = self.members[section]
            kept = sorted((i for i in members if i in chosen), key=lambda i: self.lines[i].order)
            body = [self.lines[i].text for i in kept]
            if section == FILES and older:
                body.append(OLDER_FILES + ", ".join(older))
            lost = sum(
                1 for i in members if i not in chosen and self.lines[i].path not in listed
            ) + self.dropped_before.get(section, 0)
            if lost:
                body.append(dropped_note(lost))
            parts.append(f"{section}:\n" + ("\n".join(body) or "- none"))
        return "\n\n".join(parts)
