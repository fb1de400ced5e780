"""Following local agent transcripts as they grow (`manage.py watch_transcripts`).

Every scan walks the watched folders (os.scandir and stat only: a polling scan works on every
file system, network mounts included, and needs no extra dependency) and reads, for each
Claude Code or Codex JSON-lines file that changed, only the bytes after the last clean cut
(services/importing/cuts.py): the cost of a scan is the new bytes plus the last unfinished
exchange, never the whole file. What was read is remembered on the session (`source_offset`,
`source_resume_offset`, `source_resume_seq` and `source_fingerprint`: a hash of the file's
head and of the bytes before the offset, then `@` and the file's mtime in nanoseconds), so a
restarted watcher resumes where it stopped, and takes a file whose size and mtime are those
it was read at as unchanged without opening it. A file that shrank or changed where it was
read is read again from its start: it goes on in its session when it still begins with
the session's messages, leaves the session as it is when it holds only the first of them
(truncated), and is a new session when a message differs (restart.py; docs/behaviour.md,
"Watched files that shrink or are replaced"). Symlinks inside the watched folders are not
followed, and an entry that cannot be read is logged once and skipped (watch_walk.py). A partial
last line is left for the next scan. A session file whose lines so far are all sidechain lines is
not stored until its first main-thread message arrives: read alone, those lines would be
taken for a subagent transcript and stored as the main thread, which the file later
contradicts. Some files never get one (a file holding only a subagent's exchange, say):
once such a file has been quiet (not modified) for the watcher's settle period
(SETTLE_SECONDS, `watch_transcripts --settle`), it is stored as a one-shot import stores it,
its sidechain lines as the session's messages; lines appended after that are read as new
lines of that session. Subagent transcripts (`<session>/subagents/agent-*.jsonl`)
attach to their parent session as they appear.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from django.contrib.auth.models import AbstractBaseUser

from sessions_app.importers import ImportedSession, detect_format
from sessions_app.importers.claude_code_agents import agent_meta, transcript_session_id
from sessions_app.importers.parse import parse_source
from sessions_app.importers.source import open_source
from sessions_app.models import Session
from sessions_app.services.importing import (
    find_source_session,
    merge_tree,
    source_identity,
    store_imported,
)
from sessions_app.services.importing.cuts import Cuts, find_cuts
from sessions_app.services.importing.proxied import reading_session
from sessions_app.services.importing.restart import (
    BEHIND,
    CONTINUES,
    DIVERGED,
    compare,
    mark_restart,
)
from sessions_app.services.importing.watch_walk import AGENT_FILE, Walk

__all__ = ["DEFAULT_ROOTS", "SETTLE_SECONDS", "FileSync", "Watcher", "default_roots", "sync_file"]

logger = logging.getLogger("sessions_app")

#: Where Claude Code and Codex keep their transcripts.
DEFAULT_ROOTS: Final = ("~/.claude/projects", "~/.codex/sessions")
#: Bytes of a file's head, and before where it was read to, whose hash tells a grown file
#: from a replaced one.
HEAD_BYTES: Final = 1024
WATCHED: Final = frozenset({"claude_code", "codex"})
#: A session file holding only sidechain lines is stored once quiet for this long (seconds).
SETTLE_SECONDS: Final = 60.0
_AGENT_FILE = AGENT_FILE


@dataclass(frozen=True)
class FileSync:
    """What one scan did with one file; `done` is false when it must be tried again
    (`waiting`: it holds only sidechain lines so far and has not been quiet long enough).

    `added`, `updated` and `compactions` count the rows this scan wrote (messages appended,
    messages changed, compaction points made) in every session the file feeds, its inline
    subagents included: summed over the scans of a growing file, they equal what one import
    of the whole file stores."""

    path: str
    session_id: str = ""
    added: int = 0
    updated: int = 0
    compactions: int = 0
    reread: bool = False
    done: bool = True
    waiting: bool = False
    #: The first time this watcher sees the file, it finds it already stored up to its end
    #: (nothing new): reported once, so that every watched file gets a line.
    held: bool = False

    @property
    def changed(self) -> bool:
        """True when this scan wrote rows for the file."""
        return bool(self.added or self.updated or self.compactions)


def default_roots() -> list[Path]:
    """The default folders that exist on this machine."""
    return [p for p in (Path(r).expanduser() for r in DEFAULT_ROOTS) if p.is_dir()]


def transcript_paths(roots: Iterable[Path]) -> list[Path]:
    """Every `.jsonl` file under `roots` (a root may be a file), sessions before subagents."""
    return list(Walk().run(roots))


class Watcher:
    """Scans `roots` for `owner`, skipping files unchanged (size, mtime) since its last scan.

    An unchanged file costs one `stat` (its `lstat` while walking): a file this watcher read
    before is skipped when its size and mtime are those it had then; on its first scan, a
    file whose size is the offset its session was read to (`source_offset`, all the
    owner's known files loaded by one query) is taken as unchanged without being opened.
    A session file of sidechain lines only is read again once it has been quiet (its mtime
    at least `settle` seconds before `clock()`), and then stored. A file that could not be
    read is tried again once it changes; each skipped entry is logged once.
    """

    def __init__(
        self,
        owner: AbstractBaseUser,
        roots: Iterable[Path],
        *,
        settle: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.owner = owner
        self.roots = list(roots)
        self.settle = settle
        self.clock = clock
        self._seen: dict[Path, tuple[int, int]] = {}
        self._waiting: dict[Path, tuple[int, int]] = {}
        self._failed: dict[Path, tuple[int, int]] = {}
        self._known: dict[str, tuple[int, int, str]] | None = None
        self._reported: set[tuple[Path, str]] = set()

    def scan(self, *, held: bool = False) -> list[FileSync]:
        """One pass over every watched file; the files that changed something, and with
        `held` also those seen for the first time and found already stored (`FileSync.held`:
        `watch_transcripts` prints a line for every file it follows)."""
        walk = Walk()
        found = walk.run(self.roots)
        self._report(walk.skipped)
        if self._known is None:
            self._known = _read_offsets(self.owner)
        changed: list[FileSync] = []
        for path, info in found.items():
            result = self._file(path, info)
            if result is not None and (result.changed or (held and result.held)):
                changed.append(result)
        return changed

    def _file(self, path: Path, info: os.stat_result) -> FileSync | None:
        signature = (info.st_size, info.st_mtime_ns)
        if self._seen.get(path) == signature or self._failed.get(path) == signature:
            return None
        known = self._known.pop(str(path), None) if self._known is not None else None
        first = path not in self._seen
        if first and known is not None and known[:2] == signature:
            self._seen[path] = signature  # read to its end before this watcher started
            return FileSync(str(path), session_id=known[2], held=True)
        settled = self.clock() - info.st_mtime >= self.settle
        if self._waiting.get(path) == signature and not settled:
            return None  # only sidechain lines, unchanged, not quiet long enough yet
        try:
            result = sync_file(self.owner, path, settled=settled)
        except Exception:  # one bad file must not stop the watcher
            logger.exception("could not read transcript %s (tried again once it changes)", path)
            self._failed[path] = signature
            return None
        self._failed.pop(path, None)
        if result.waiting:
            self._waiting[path] = signature
        else:
            self._waiting.pop(path, None)
        if result.done:
            self._seen[path] = signature
        if first and result.done and not result.changed and result.session_id:
            return dataclasses.replace(result, held=True)
        return result

    def _report(self, skipped: dict[Path, str]) -> None:
        for path, reason in skipped.items():
            if (path, reason) not in self._reported:
                self._reported.add((path, reason))
                logger.warning("watch_transcripts: skipped %s: %s", path, reason)


def _read_offsets(owner: AbstractBaseUser) -> dict[str, tuple[int, int, str]]:
    """Each known transcript path of `owner`: (the offset its session was read to, the
    file's mtime then, kept after the `@` of `source_fingerprint`, the session's id)."""
    rows = (
        Session.objects.filter(owner_id=owner.pk)
        .exclude(source_path="")
        .filter(source_fingerprint__contains="@")
        .order_by("-created_at")
        .values_list("source_path", "source_offset", "source_fingerprint", "pk")
    )
    known: dict[str, tuple[int, int, str]] = {}
    for path, offset, fingerprint, pk in rows:
        mtime = fingerprint.rpartition("@")[2]
        if mtime.isdigit():
            known[path] = (offset, int(mtime), str(pk))
    return known


def sync_file(
    owner: AbstractBaseUser, path: Path, *, settled: bool = False, from_start: bool = False
) -> FileSync:
    """Read what is new in the transcript at `path` into its session (`from_start`: read
    the whole file again, as for a file that shrank or was replaced).

    A session file holding only sidechain lines so far waits for its main thread unless
    `settled` (it has been quiet for the settle period): then it is stored as a one-shot
    import stores it, and read on from its end.
    """
    session = reading_session(owner, text := str(path))
    if session is not None and session.proxy_key and not settled:  # the proxy records it live
        return FileSync(text, done=False, waiting=True)  # proxied.py, read once it is quiet
    with open(path, "rb") as file:
        info = os.fstat(file.fileno())
        size = info.st_size
        resume = None if from_start else _resume_point(session, file, size)
        known = session if resume is not None else None
        start, seq = resume or (0, 0)
        if known is not None and size == known.source_offset:
            return FileSync(text)
        file.seek(start)
        data = file.read(size - start)
        fmt = known.source_format if known is not None else _format(file)
        if fmt not in WATCHED:
            return FileSync(text)
        cuts = find_cuts(data[: data.rfind(b"\n") + 1], fmt)
        if known is not None and start + cuts.end == known.source_offset:
            return FileSync(text)
        if known is not None and cuts.rewound:  # placed against the whole file
            return sync_file(owner, path, settled=settled, from_start=True)
        cut = _cut(known, cuts, path, settled)
        if cut is None:  # only sidechain lines yet: wait for the main thread
            return FileSync(text, done=False, waiting=True)
        fingerprint = f"{_fingerprint(file, start + cuts.end)}@{info.st_mtime_ns}"
    reread = session is not None and known is None
    # docs/behaviour.md, "Watched files that shrink or are replaced": a file read again
    # holding fewer messages leaves its session as it is; one that differs from its session
    # (a rewound history too) restarted, and its content is a new session.
    relation = _relation(session, data[: cuts.end], path, seq)
    if relation == BEHIND and reread:
        return FileSync(text, reread=True)
    if relation == DIVERGED and known is not None:  # differs before its last cut
        return sync_file(owner, path, settled=settled, from_start=True)
    return _Sync(owner, path, fmt, known, fresh=relation == DIVERGED).run(
        data, start, seq, cut, cuts.end, fingerprint, previous=session, reread=reread
    )


def _cut(known: Session | None, cuts: Cuts, path: Path, settled: bool) -> int | None:
    """Where the open tail of the part starts; None while a new session file holds only
    sidechain lines and has not been quiet for the settle period."""
    if known is not None or cuts.main or _AGENT_FILE.match(path.name):
        return cuts.last
    # No main thread came: stored whole, so later lines are read from its end (from an
    # earlier cut they would be parsed apart from the lines stored).
    return cuts.end if settled else None


def _relation(session: Session | None, data: bytes, path: Path, seq: int) -> str:
    """How the complete lines `data` (read from the cut where message `seq` was read)
    stand to `session`."""
    if session is None or session.proxy_key:  # proxied.py lines the two up
        return CONTINUES
    with open_source(data, name=path.name) as opened:
        imported = parse_source(opened, session.source_format, subagents=False)
    try:
        return compare(session, imported, seq)
    finally:
        imported.close()


def _resume_point(session: Session | None, file: IO[bytes], size: int) -> tuple[int, int] | None:
    """(offset, seq) to read from (the last cut), or None to read a new, shrunk or replaced
    file (or one imported by hand) from its start."""
    if session is None or not session.source_fingerprint or size < session.source_offset:
        return None
    if _fingerprint(file, session.source_offset) != session.source_fingerprint.split("@")[0]:
        return None
    return session.source_resume_offset, session.source_resume_seq


def _fingerprint(file: IO[bytes], offset: int) -> str:
    """A hash of the file's head and of the bytes just before `offset`: a file grown since
    has both unchanged; one replaced or rewritten (even past its head) does not."""
    file.seek(0)
    digest = hashlib.sha256(file.read(min(offset, HEAD_BYTES)))
    tail = max(HEAD_BYTES, offset - HEAD_BYTES)
    if offset > tail:
        file.seek(tail)
        digest.update(file.read(offset - tail))
    return digest.hexdigest()[:40]


def _format(file: IO[bytes]) -> str | None:
    file.seek(0)
    return detect_format(file.read(64 * 1024))


class _Sync:
    """One file's new part, read into its session: the complete part, then the open tail."""

    def __init__(
        self,
        owner: AbstractBaseUser,
        path: Path,
        fmt: str,
        session: Session | None,
        *,
        fresh: bool = False,
    ) -> None:
        self.owner = owner
        self.fresh = fresh  # the file restarted: its content is a new session
        self.path = path
        self.fmt = fmt
        self.session = session
        self.added = self.updated = self.compactions = 0

    def run(
        self,
        data: bytes,
        start: int,
        seq: int,
        cut: int,
        end: int,
        fingerprint: str,
        *,
        previous: Session | None,
        reread: bool,
    ) -> FileSync:
        parent = self._parent() if _AGENT_FILE.match(self.path.name) else None
        if _AGENT_FILE.match(self.path.name) and parent is None:
            return FileSync(str(self.path), done=False)  # its parent session comes first
        resume = self._part(data[:cut], seq, parent)
        self._part(data[cut:end], resume, parent)
        if self.session is None:
            return FileSync(str(self.path))
        if previous is not None and previous.pk != self.session.pk:
            shrank = start + end < previous.source_offset
            mark_restart(previous, self.session, "shrank" if shrank else "replaced")
        Session.objects.filter(pk=self.session.pk).update(
            source_path=str(self.path),
            source_offset=start + end,
            source_fingerprint=fingerprint,
            source_resume_offset=start + cut,
            source_resume_seq=resume,
        )
        if parent is None:
            link_subagents(self.session)
        return FileSync(
            str(self.path),
            str(self.session.pk),
            self.added,
            self.updated,
            self.compactions,
            reread=reread,
        )

    def _part(self, data: bytes, seq: int, parent: Session | None) -> int:
        """Read one part into the session; the seq after its last message."""
        if not data.strip():
            return seq
        with open_source(data, name=self.path.name) as opened:
            imported = parse_source(opened, self.fmt, subagents=False)
        try:
            if not imported.messages and not imported.compactions:
                return seq
            self._describe(imported, parent)
            if self.session is None:
                self.session = self._find(imported, parent)
            if self.session is None:
                stored = store_imported(self.owner, imported, parent=parent)
                self.session = stored[0]
                # Its inline subagents (sidechains) are stored with it: counted too.
                self.added += sum(each.message_count for each in stored)
                self.compactions += sum(each.compaction_count for each in stored)
                return len(imported.messages)
            # Its inline subagents too: a sidechain may arrive after the first scan.
            result = merge_tree(self.session, imported, start_seq=seq)
            self.added += result.added
            self.updated += result.updated
            self.compactions += result.compactions
            return result.end_seq
        finally:
            imported.close()

    def _describe(self, imported: ImportedSession, parent: Session | None) -> None:
        imported.source_path = str(self.path)
        match = _AGENT_FILE.match(self.path.name)
        if parent is None or match is None:
            imported.external_id = source_identity(imported)
            return
        agent_id = match.group(1)
        imported.external_id = agent_id
        imported.metadata["agent_id"] = agent_id
        spawned = parent.metadata.get("spawned_agents") or {}
        imported.parent_tool_use_id = str(spawned.get(agent_id, ""))
        meta = agent_meta(self.path)
        if meta:
            imported.metadata["agent"] = meta
            if isinstance(meta.get("description"), str) and meta["description"].strip():
                imported.title = meta["description"].strip()[:200]

    def _find(self, imported: ImportedSession, parent: Session | None) -> Session | None:
        if self.fresh:
            return None
        if parent is None:
            return find_source_session(self.owner, imported)
        return Session.objects.filter(parent=parent, external_id=imported.external_id).first()

    def _parent(self) -> Session | None:
        """The session of the Claude Code file this subagent transcript belongs to."""
        folder = self.path.parent.parent if self.path.parent.name == "subagents" else None
        candidates = [folder.with_suffix(".jsonl")] if folder is not None else []
        sessions = Session.objects.filter(owner_id=self.owner.pk, parent__isnull=True)
        for candidate in candidates:
            found = sessions.filter(source_path=str(candidate)).first()
            if found is not None:
                return found
        session_id = transcript_session_id(self.path)
        if not session_id:
            return None
        return sessions.filter(source_format="claude_code", external_id=session_id).first()


def link_subagents(session: Session) -> None:
    """Link subagent sessions to the tool call that started them, once the parent knows it."""
    spawned: Any = session.metadata.get("spawned_agents") or {}
    if not isinstance(spawned, dict) or not spawned:
        return
    for child in Session.objects.filter(parent=session, parent_tool_use_id=""):
        tool_id = spawned.get(child.external_id)
        if isinstance(tool_id, str) and tool_id:
            Session.objects.filter(pk=child.pk).update(parent_tool_use_id=tool_id[:200])
