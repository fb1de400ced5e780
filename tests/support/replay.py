"""One transcript stored by different paths, described so the results can be compared.

- `import_once(path)`: the transcript imported in one go (the reference);
- `watch_in_chunks(path, cuts)`: the same bytes written into a watched folder in pieces (cut at
  the given byte offsets, mid-line included), with a `Watcher.scan()` after each piece and a
  last scan once the file has been quiet for the settle period;
- `watchable(path)`: whether the watcher follows such a file at all (Claude Code, Codex);
- `describe(owner)`: the sessions an owner has, as a comparable `Sessions` value, for any path
  (the proxy's replay, say).

Each call stores for a user of its own (made here), so several paths can run in one test.
A `Sessions` value is the forest of stored sessions: each `Stored` node holds its messages
(role and canonical content), the tool call that started it, and its subagents, sorted, so
two paths give equal values exactly when they stored the same number of sessions, with the
same parent links and the same messages in each. For a Claude Code 2.x session file, its
`subagents/agent-*.jsonl` files are copied and written in pieces too (each cut at the same
fraction of its length as the session file), after the session file's piece.
"""

from __future__ import annotations

import itertools
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from django.contrib.auth import get_user_model

from sessions_app.canonical import canonical_json
from sessions_app.importers import detect_format
from sessions_app.models import Message, Session
from sessions_app.services.importing import import_file
from sessions_app.services.importing.watching import WATCHED, Watcher

__all__ = [
    "Sessions",
    "Stored",
    "canonical_content",
    "count",
    "describe",
    "import_once",
    "new_owner",
    "watch_in_chunks",
    "watchable",
]

_SETTLE: Final = 60.0
_owners = itertools.count(1)
#: A one-shot import makes a sample's repeated placeholder tool ids unique as `id~2`; a part
#: read alone cannot know the earlier ones, so the suffix is not compared.
_UNIQUE_SUFFIX = re.compile(r"~\d+$")
_ID_KEYS: Final = frozenset({"id", "tool_use_id"})


@dataclass(frozen=True, order=True)
class Stored:
    """One stored session: its messages as (role, canonical content), the tool call that
    started it (a subagent's), and its subagents."""

    messages: tuple[tuple[str, str], ...]
    parent_tool_use_id: str
    children: tuple[Stored, ...]


#: Every root session of an owner, sorted.
Sessions = tuple[Stored, ...]


def new_owner() -> Any:
    """A fresh user, so each path stores apart."""
    return get_user_model().objects.create_user(f"replay-{next(_owners)}", password="x")


def watchable(path: Path) -> bool:
    """True for a transcript the watcher follows: a Claude Code or Codex `.jsonl` file (an
    OpenHands `.json` or SWE-agent `.traj` file is imported by hand, never watched)."""
    if path.suffix != ".jsonl":
        return False
    with open(path, "rb") as file:
        return detect_format(file.read(64 * 1024)) in WATCHED


def import_once(path: Path, owner: Any = None) -> Sessions:
    """`path` imported in one go (its subagent files with it) for `owner` (a new user)."""
    owner = owner or new_owner()
    import_file(owner, path)
    return describe(owner)


def watch_in_chunks(
    path: Path, cuts: Sequence[int], folder: Path, owner: Any = None, *, settle_at_end: bool = True
) -> Sessions:
    """Write `path` into `folder` (a new, watched folder) in pieces ending at the byte
    offsets `cuts` (sorted, mid-line allowed), scanning after each piece, then the rest and a
    scan, then (`settle_at_end`) one more scan once every file has been quiet for the settle
    period. Its `subagents/` files, when it has some, go along (see the module docstring)."""
    owner = owner or new_owner()
    folder.mkdir(parents=True, exist_ok=False)
    data = path.read_bytes()
    pieces = _pieces(path, folder)
    clock = _Clock()
    watcher = Watcher(owner, [folder], settle=_SETTLE, clock=clock)
    for end in [*sorted(set(cuts)), len(data)]:
        fraction = min(max(end, 0), len(data)) / len(data) if data else 1.0
        for source, target in pieces:
            _write_to(source, target, fraction)
        clock.now += 1
        watcher.scan()
    if settle_at_end:
        clock.now += 2 * _SETTLE
        watcher.scan()
    return describe(owner)


def _pieces(path: Path, folder: Path) -> list[tuple[Path, Path]]:
    """(source, target) of the session file, then of each of its subagent files (in
    `<session>/subagents/` as Claude Code 2.x keeps them, or in `subagents/` beside it)."""
    pairs = [(path, folder / path.name)]
    for agents, target in (
        (path.with_suffix("") / "subagents", folder / path.with_suffix("").name / "subagents"),
        (path.parent / "subagents", folder / "subagents"),
    ):
        if not agents.is_dir():
            continue
        target.mkdir(parents=True)
        for each in sorted(agents.glob("agent-*")):
            if each.name.endswith(".meta.json"):
                shutil.copy(each, target / each.name)
            elif each.suffix == ".jsonl":
                pairs.append((each, target / each.name))
        break
    return pairs


def _write_to(source: Path, target: Path, fraction: float) -> None:
    """Make `target` the first `fraction` of `source` (it only grows)."""
    data = source.read_bytes()
    end = round(len(data) * fraction)
    have = target.stat().st_size if target.exists() else 0
    if end > have or not target.exists():
        with open(target, "ab") as file:
            file.write(data[have:end])


class _Clock:
    """The watcher's clock: moved by hand, so a settle period passes without waiting."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def describe(owner: Any) -> Sessions:
    """Every session of `owner` as a comparable forest."""
    roots = Session.objects.filter(owner=owner, parent__isnull=True)
    return tuple(sorted(_node(session) for session in roots))


def _node(session: Session) -> Stored:
    rows = Message.objects.filter(session=session).order_by("seq")
    messages = tuple((m.role, canonical_content(m.content)) for m in rows)
    children = tuple(sorted(_node(child) for child in Session.objects.filter(parent=session)))
    tool = _suffix_free(session.parent_tool_use_id)
    return Stored(messages, tool, children)


def count(sessions: Sessions) -> int:
    """How many sessions the forest holds."""
    return sum(1 + count(node.children) for node in sessions)


def canonical_content(content: Any) -> str:
    """A message's content as compared: its canonical form (sessions_app/canonical.py: a
    string and one text block are the same, key order, `cache_control` and empty values do
    not count), tool ids without a one-shot import's `~n` suffix."""
    return canonical_json({"role": "", "content": _strip(content)})


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _strip(_suffix_free(item) if key in _ID_KEYS else item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def _suffix_free(value: Any) -> Any:
    return _UNIQUE_SUFFIX.sub("", value) if isinstance(value, str) else value
