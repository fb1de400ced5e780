"""What an offload wrote, for the compaction log: its files with their sizes.

An offload of its own (services/compacting/offloading.py) records its files and sizes in
`details["offload"]`; a compaction whose chain ran the offload step records the files in
that step's detail (sizes not kept there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from sessions_app.models import Compaction

__all__ = ["OffloadFile", "OffloadView", "offload_view"]


@dataclass(frozen=True)
class OffloadFile:
    """One file written: its name in the session's offload area and its size in bytes."""

    name: str
    size: int | None = None


@dataclass(frozen=True)
class OffloadView:
    """The files an offload wrote; `own`: a record of an offload alone (not a chain step)."""

    files: list[OffloadFile]
    own: bool
    freed_chars: int | None = None
    min_chars: int | None = None


def offload_view(compaction: Compaction) -> OffloadView | None:
    """The offload part of a compaction record, or None when it offloaded nothing."""
    details = compaction.details if isinstance(compaction.details, Mapping) else {}
    own = details.get("offload")
    if compaction.is_offload and isinstance(own, Mapping):
        return OffloadView(
            files=[f for f in map(_file, own.get("files") or []) if f is not None],
            own=True,
            freed_chars=_int(own.get("freed_chars")),
            min_chars=_int(own.get("min_chars")),
        )
    for step in details.get("steps") or []:
        if isinstance(step, Mapping) and step.get("step") == "offload" and step.get("changed"):
            found = step.get("detail")
            detail: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            files = [f for f in map(_file, detail.get("files") or []) if f is not None]
            return OffloadView(files=files, own=False, freed_chars=_int(detail.get("freed_chars")))
    return None


def _file(item: Any) -> OffloadFile | None:
    """A recorded file: {"name", "bytes"}, or a stored location (its last part is the name)."""
    if isinstance(item, Mapping):
        name = item.get("name")
        return OffloadFile(str(name), _int(item.get("bytes"))) if name else None
    if isinstance(item, str) and item:
        return OffloadFile(PurePosixPath(item.replace("\\", "/")).name)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
