"""The extractive summary beside the state block (docs/behaviour.md#what-a-summary-always-keeps):
the lines the block the engine appends holds already are left to it.

The block lists every touched file, the todo list and the latest requests; the extractive
summary drops its own lines of these (the goal line stays, as the narrative's first line)
and says where the files are instead, so the state costs its tokens once.
"""

from __future__ import annotations

from typing import Final

from ..carried_state import expand_path_groups
from .prompt import SECTIONS
from .summary_fit import Line

__all__ = ["beside_state"]

GOALS, FILES, TOOLS, STATE, ERRORS = SECTIONS
#: The priority of the goal line (`extractive._GOAL`): the best, kept first.
_GOAL: Final = 0
_ASKED: Final = "- User asked: "
_FILES_IN_STATE: Final = "- every file touched: in the session state below"


def beside_state(lines: list[Line], block: str) -> list[Line]:
    """`lines` without those `block` holds already (module doc); `lines` without a block."""
    if not block:
        return lines
    words = {word.rstrip(":,") for word in expand_path_groups(block).split()}
    # An earlier summary in the middle brings its own pointer to the block: one is enough.
    own = [line for line in lines if line.text != _FILES_IN_STATE]
    kept = [line for line in own if not _held(line, block, words)]
    if len(kept) < len(lines) and any(line.section == FILES for line in lines):
        kept.append(Line(FILES, _FILES_IN_STATE, _GOAL, -1))
    return kept


def _held(line: Line, block: str, words: set[str]) -> bool:
    if line.path is not None:
        return line.path in words
    if line.section == STATE and line.text.startswith("- ["):
        return line.text in block
    if line.section == GOALS and line.priority != _GOAL and line.text.startswith(_ASKED):
        return line.text.removeprefix(_ASKED).removesuffix(" …") in block
    return False
