"""Helpers shared by the management commands: users, sessions, transcript files, progress."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TextIO

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from ..models import Session

__all__ = ["ProgressBar", "resolve_session", "resolve_user", "transcript_files"]

#: File endings of transcripts (a folder is searched for these).
TRANSCRIPT_SUFFIXES: Final = (".jsonl", ".json", ".traj")


def resolve_user(username: str) -> Any:
    """The user named `username`; CommandError naming the option when there is none."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(
            f"no user {username!r}: create it (manage.py ensure_admin) or give --owner USER"
        )
    return user


def resolve_session(value: str) -> Session:
    """A session by id, or by an unambiguous id prefix of at least 4 characters."""
    try:
        return Session.objects.get(pk=uuid.UUID(value))
    except (ValueError, Session.DoesNotExist):
        pass
    prefix = value.strip().lower()
    if len(prefix) < 4:
        raise CommandError(f"no session {value!r} (give its id, or at least 4 of its characters)")
    matches = [s for s in Session.objects.only("id") if str(s.pk).startswith(prefix)][:2]
    if not matches:
        raise CommandError(f"no session {value!r}")
    if len(matches) > 1:
        raise CommandError(f"{value!r} matches several sessions: give more of the id")
    return Session.objects.get(pk=matches[0].pk)


def transcript_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Transcript files of the given files and folders, in a stable order.

    A folder (such as a Claude Code project folder) gives all its transcripts, searched
    recursively; subagent transcripts (`agent-*.jsonl`, `<session>/subagents/`) and
    `.meta.json` files are left out: they come with the session they belong to.
    """
    for path in map(Path, paths):
        if path.is_dir():
            yield from _folder(path)
        elif path.exists():
            yield path
        else:
            raise CommandError(f"{path}: no such file or folder")


def _folder(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            if path.name == "subagents" or (folder / f"{path.name}.jsonl").is_file():
                continue  # a session's own folder of subagent transcripts
            yield from _folder(path)
        elif (
            path.suffix in TRANSCRIPT_SUFFIXES
            and not path.name.startswith("agent-")
            and not path.name.endswith(".meta.json")
        ):
            yield path


class ProgressBar:
    """A one-line progress bar on a terminal stream (stderr), redrawn at most 10 times/s."""

    WIDTH: Final = 24

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = ""
        self._drawn = 0.0

    def start(self, label: str) -> None:
        """Begin a new item (a file)."""
        self.label = label
        self._drawn = 0.0

    def update(self, stage: str, done: int, total: int) -> None:
        """Progress within the current item: `stage` with `done` out of `total`."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn < 0.1 and done < total:
            return
        self._drawn = now
        fraction = min(done / total, 1.0) if total else 1.0
        filled = round(self.WIDTH * fraction)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label[:50]:50} {stage:8} [{bar}] {fraction:4.0%}")
        self.stream.flush()

    def clear(self) -> None:
        """Remove the bar (before a normal line of output)."""
        if self.enabled:
            self.stream.write("\r" + " " * 90 + "\r")
            self.stream.flush()
