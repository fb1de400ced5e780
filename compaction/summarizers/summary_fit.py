"""Fitting the extractive summary's lines into `max_tokens` (tiktoken), section by section.

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

import heapq
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import Final, NamedTuple, Protocol

from ..tokens import text_counter
from .prompt import SECTIONS

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


_SECTION_AND_TEXT: Final = itemgetter(0, 1)
_SECTION: Final = itemgetter(0)


def dropped_note(count: int) -> str:
    """The note of a section that lost `count` lines."""
    return f"- ({count} older {'entry' if count == 1 else 'entries'} left out for space)"


def dedupe(lines: Sequence[Line]) -> list[Line]:
    """`lines` without repeats (same section and text): the best priority, newest position."""
    if len(dict.fromkeys(map(_SECTION_AND_TEXT, lines))) == len(lines):  # the common case
        return list(lines)
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
    required: Sequence[str] = (),
) -> str:
    """Render the lines that fit in `max_tokens` (module doc). Lines are only encoded when
    they are considered. `dropped_before`: lines per section earlier summaries left out.
    `required`: identifiers to list first, as if `lines` began with the line
    `Line(KEY_IDENTIFIERS, f"- {identifier}", 0, position)` of each (made when considered:
    most of a long list is only counted)."""
    count = text_counter(encoding)
    every: _Lines = _Required(required, lines) if required else lines
    costs: dict[int, int] = {}

    def cost(index: int) -> int:
        if index not in costs:
            costs[index] = count(every[index].text) + 1
        return costs[index]

    ranks = _Ranks(lines, len(required))
    sections = list(SECTIONS) + ([KEY_IDENTIFIERS] if ranks.any_required else [])
    fixed = sum(_count(f"{section}:\n- none\n", encoding) + _NOTE_RESERVE for section in sections)
    budget = max_tokens - fixed
    chosen: set[int] = set()
    spent = _take(ranks.required(), budget, cost, chosen)
    shared = budget - spent
    files = _Files(ranks.files, ranks.paths, encoding)
    for section, share in _SHARES.items():
        if section == FILES:
            spent += files.take(int(shared * share), cost, chosen)
        spent += _take(ranks.essential[section], int(shared * share), cost, chosen)
    spent += files.list_more(budget - spent)
    rest = (i for i in ranks.others() if i not in chosen)  # each index comes once
    spent += _take(rest, budget - spent, cost, chosen)
    layout = _Layout(every, ranks, sections, dict(dropped_before or {}))
    older = files.older
    text = layout.render(chosen, older)
    while count(text) > max_tokens and (chosen or older):
        if older:
            older.pop()
        else:
            chosen.discard(max(chosen, key=lambda i: (every[i].priority, -every[i].order)))
        text = layout.render(chosen, older)
    return text


class _Lines(Protocol):
    def __getitem__(self, index: int, /) -> Line: ...


class _Required:
    """The lines of `fit`: those of the required identifiers (made when first read), then
    the others."""

    def __init__(self, identifiers: Sequence[str], lines: Sequence[Line]) -> None:
        self.identifiers = identifiers
        self.lines = lines
        self.made: dict[int, Line] = {}

    def __getitem__(self, index: int) -> Line:
        if index >= len(self.identifiers):
            return self.lines[index - len(self.identifiers)]
        line = self.made.get(index)
        if line is None:
            line = Line(KEY_IDENTIFIERS, f"- {self.identifiers[index]}", 0, index)
            self.made[index] = line
        return line


class _Ranks:
    """The lines' indexes best first (priority, then newest, then first), sorted out once:
    the key identifiers, the file lines, each section's essential lines and the others.

    The first `required` indexes are the required identifiers' lines (`fit`): priority 0,
    each index its order, so they rank newest first, before the others of priority 0 that
    are not newer."""

    def __init__(self, lines: Sequence[Line], required: int) -> None:
        # Two stable sorts on plain keys give the order of one sort on (priority, -order).
        newest = [-line.order for line in lines]
        ranked = sorted(range(len(lines)), key=newest.__getitem__)
        ranked.sort(key=[line.priority for line in lines].__getitem__)
        self.lines = lines
        self.count = required
        self.identifiers: list[int] = []  # the lines of KEY_IDENTIFIERS among `lines`
        self.files: list[int] = []
        self.paths: list[str] = []  # each file line's
        self.rest: list[int] = []  # the lines that are not a file's
        self.essential: dict[str, list[int]] = {section: [] for section in _SHARES}
        for index in ranked:
            section, _, priority, _, path = lines[index]
            at = index + required
            if section == KEY_IDENTIFIERS:
                self.identifiers.append(at)
            if path is not None:
                self.files.append(at)
                self.paths.append(path)
                continue
            self.rest.append(at)
            if priority <= _ESSENTIAL and section in self.essential:
                self.essential[section].append(at)
        self.any_required = bool(required or self.identifiers)

    def required(self) -> Iterable[int]:
        """The lines of KEY_IDENTIFIERS, best first."""
        return self._with_required(self.identifiers)

    def others(self) -> Iterable[int]:
        """The lines that are not a file's, best first."""
        return self._with_required(self.rest)

    def _with_required(self, ranked: list[int]) -> Iterable[int]:
        if not self.count:
            return ranked
        identifiers = range(self.count - 1, -1, -1)
        return heapq.merge(identifiers, ranked, key=self._rank)

    def _rank(self, index: int) -> tuple[int, float, int]:
        if index < self.count:
            return (0, -index, index)
        line = self.lines[index - self.count]
        return (line.priority, -line.order, index)


class _Files:
    """The file lines: the best have a line of their own, the next are listed on the
    `OLDER_FILES` line (a path costs less than a line), so more paths fit."""

    def __init__(self, ranked: list[int], paths: list[str], encoding: str | None) -> None:
        self.ranked = ranked
        self.paths = paths  # each ranked line's
        self.costs = [_count(str(path), encoding) + 1 for path in paths]
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
            self.older.append(str(self.paths[self.listed]))
            used += self.costs[self.listed]
            self.listed += 1
        return used if len(self.older) > start else 0


@lru_cache(maxsize=8192)
def _count(text: str, encoding: str | None) -> int:
    """Tokens of a path or a heading: the same ones recur in every summary of a run."""
    return text_counter(encoding)(text)


def _take(
    candidates: Iterable[int], allowance: int, cost: Callable[[int], int], chosen: set[int]
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


class _Layout:
    """Renders chosen lines, the older files' line and each section's dropped note."""

    def __init__(
        self, lines: _Lines, ranks: _Ranks, sections: Sequence[str], dropped_before: dict[str, int]
    ) -> None:
        self.lines = lines
        self.sections = sections
        self.dropped_before = dropped_before
        counts = Counter(map(_SECTION, ranks.lines))
        counts[KEY_IDENTIFIERS] += ranks.count
        self.sizes = {section: counts[section] for section in sections}  # lines of each
        #: Each section's file lines: (index, path), in no particular order.
        self.pathed: dict[str, list[tuple[int, str]]] = {section: [] for section in sections}
        for index, path in zip(ranks.files, ranks.paths, strict=True):
            section = ranks.lines[index - ranks.count].section
            self.pathed.setdefault(section, []).append((index, path))

    def render(self, chosen: set[int], older: Sequence[str]) -> str:
        listed = set(older)
        lines = self.lines
        kept: dict[str, list[int]] = {section: [] for section in self.sections}
        for index in sorted(chosen):  # by section, in the order of the lines
            kept.setdefault(lines[index].section, []).append(index)
        parts = []
        for section in self.sections:
            shown = sorted(kept[section], key=lambda i: lines[i].order)
            body = [lines[i].text for i in shown]
            if section == FILES and older:
                body.append(OLDER_FILES + ", ".join(older))
            # The lines left out: those not chosen, less the files listed on the older line
            # (only a line with a path can be listed).
            listed_out = sum(
                1 for i, path in self.pathed[section] if i not in chosen and path in listed
            )
            lost = self.sizes[section] - len(shown) - listed_out
            lost += self.dropped_before.get(section, 0)
            if lost:
                body.append(dropped_note(lost))
            parts.append(f"{section}:\n" + ("\n".join(body) or "- none"))
        return "\n\n".join(parts)
