"""Walking the watched folders (services/importing/watching.py): each regular `.jsonl` file with its
`lstat`, and the entries skipped with the reason; no symlink inside the folders is followed
(docs/behaviour.md, "Watched transcripts")."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = ["AGENT_FILE", "Walk"]

#: A Claude Code subagent transcript (`subagents/agent-<id>.jsonl`): walked after sessions.
AGENT_FILE: Final = re.compile(r"^agent-(.+)\.jsonl$")


class Walk:
    """One walk of the watched folders: each regular `.jsonl` file and its `lstat`, sessions
    before subagents, and the entries skipped with the reason (docs/behaviour.md, "Watched
    transcripts").

    A root named on the command line is followed even when it is a symlink; inside the
    folders no symlink is followed, to a file or to a folder: a watched folder holds what
    the agents wrote there, and a link could lead out of it or round in a loop. An entry that
    cannot be read (a loop, no permission, gone between listing and `stat`) or that is no
    regular file (a fifo, a device) is skipped, never fatal to the walk."""

    def __init__(self) -> None:
        self.found: dict[Path, os.stat_result] = {}
        self.skipped: dict[Path, str] = {}

    def run(self, roots: Iterable[Path]) -> dict[Path, os.stat_result]:
        for root in roots:
            try:
                info = root.stat()
                resolved = root.resolve()
            except (OSError, RuntimeError) as error:  # RuntimeError: a loop, older Pythons
                self.skipped[root] = _reason(error)
                continue
            if stat.S_ISDIR(info.st_mode):
                self._folder(resolved)
            elif stat.S_ISREG(info.st_mode):
                self.found[resolved] = info
            else:
                self.skipped[root] = "not a regular file or folder"
        order = sorted(self.found, key=lambda p: (AGENT_FILE.match(p.name) is not None, str(p)))
        return {path: self.found[path] for path in order}

    def _folder(self, folder: Path) -> None:
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as error:
            self.skipped[folder] = _reason(error)
            return
        for entry in entries:
            try:
                self._entry(entry)
            except OSError as error:  # vanished, unreadable, a loop: this entry only
                self.skipped[Path(entry.path)] = _reason(error)

    def _entry(self, entry: os.DirEntry[str]) -> None:
        if entry.is_symlink():
            if entry.name.endswith(".jsonl") or entry.is_dir():
                self.skipped[Path(entry.path)] = "a symlink (not followed)"
            return
        if entry.is_dir(follow_symlinks=False):
            self._folder(Path(entry.path))
        elif entry.name.endswith(".jsonl"):
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                self.found[Path(entry.path)] = info
            else:
                self.skipped[Path(entry.path)] = "not a regular file"


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
