"""Reading an earlier summary back into its parts, so a new summary merges it structurally.

A summary of summaries must not drift (docs/behaviour.md#summaries-of-summaries): the extractive
summarizer does not re-summarize an earlier summary's prose, it takes its sections apart (the goal,
the files with their operations, the tool counts, the open items, the errors, what was left
out) and merges each into the new summary's own, where newer facts update older ones.
The headings are the prompt's SECTIONS, so LLM summaries are read the same way. The file
outlines appended to a summary (`<system-reminder>` blocks) are not summary lines and are
skipped, and so is its state block (`state_block`): the engine carries the state itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ..carried_state import without_state_block
from ..messages import SUMMARY_PREFIX
from .prompt import CUT_MARKER, SECTIONS
from .summary_fit import DROPPED_NOTE, KEY_IDENTIFIERS, OLDER_FILES

__all__ = ["EarlierSummary", "parse_summary", "section_named"]

GOALS, FILES, TOOLS, STATE, ERRORS = SECTIONS

_HEADING: Final = re.compile(r"^\s*(?:#+\s*|\d+[.)]\s*)?(?P<title>[A-Za-z][\w ,&/-]*?)\s*:?\s*$")
_OPERATIONS: Final = frozenset(
    {"read", "written", "modified", "deleted", "used", "mentioned", "touched"}
)
_FILE_LINE: Final = re.compile(r"^- (?P<path>\S+): (?P<ops>[a-z]+(?:, [a-z]+)*)$")
_TOOL_COUNTS: Final = re.compile(r"^- \d+ tool calls: (?P<counts>.+)$")
_TOOL_COUNT: Final = re.compile(r"(?P<name>[^,]+?) x(?P<calls>\d+)(?: \((?P<failed>\d+) failed\))?")
_LATEST: Final = re.compile(r"^- Latest assistant update: (?P<text>.+)$")
_TODO: Final = re.compile(r"^- \[[\w -]+\] .+$")


@dataclass
class EarlierSummary:
    """The parts of an earlier summary; `lines` holds the lines kept as they are."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    files: list[tuple[str, list[str]]] = field(default_factory=list)
    tool_counts: dict[str, list[int]] = field(default_factory=dict)
    todos: list[str] = field(default_factory=list)
    latest_update: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)

    def add(self, section: str, line: str) -> None:
        self.lines.setdefault(section, []).append(line)


def section_named(title: str) -> str | None:
    """The section (or KEY_IDENTIFIERS) whose heading is `title`, case-insensitively."""
    wanted = title.strip().lower()
    for section in (*SECTIONS, KEY_IDENTIFIERS):
        if section.lower() == wanted:
            return section
    return None


def parse_summary(text: str) -> EarlierSummary:
    """The parts of a summary written with the prompt's sections (module doc)."""
    parsed = EarlierSummary()
    section = GOALS
    in_outline = False
    for raw in without_state_block(text.removeprefix(SUMMARY_PREFIX)).splitlines():
        line = raw.strip()
        if "<system-reminder>" in line or in_outline:
            in_outline = "</system-reminder>" not in line
            continue
        heading = _HEADING.match(line)
        named = section_named(heading.group("title")) if heading else None
        if named:
            section = named
            continue
        if not line or line == CUT_MARKER or line.lstrip("- ").lower() == "none":
            continue
        _read_line(parsed, section, line if line.startswith("- ") else f"- {line}")
    return parsed


def _read_line(parsed: EarlierSummary, section: str, line: str) -> None:
    dropped = DROPPED_NOTE.match(line)
    if dropped:
        parsed.dropped[section] = parsed.dropped.get(section, 0) + int(dropped.group(1))
    elif section == FILES:
        _file_line(parsed, line)
    elif section == TOOLS and (counts := _TOOL_COUNTS.match(line)):
        for match in _TOOL_COUNT.finditer(counts.group("counts")):
            total = parsed.tool_counts.setdefault(match.group("name").strip(), [0, 0])
            total[0] += int(match.group("calls"))
            total[1] += int(match.group("failed") or 0)
    elif section == STATE and (latest := _LATEST.match(line)):
        parsed.latest_update = latest.group("text")
    elif section == STATE and _TODO.match(line):
        parsed.todos.append(line)
    else:
        parsed.add(section, line)


def _file_line(parsed: EarlierSummary, line: str) -> None:
    if line.startswith(OLDER_FILES):
        paths = [path.strip() for path in line.removeprefix(OLDER_FILES).split(", ")]
        parsed.files.extend((path, []) for path in paths if path)
        return
    match = _FILE_LINE.match(line)
    operations = match.group("ops").split(", ") if match else []
    if match and set(operations) <= _OPERATIONS:
        parsed.files.append((match.group("path"), operations))
    else:
        parsed.add(FILES, line)
