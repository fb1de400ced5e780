"""What a compaction's summary lost: the identifiers of its originals the summary omits.

The engine's retention check (`compaction.extract_identifiers`, `compaction.measure_recall`)
names the paths, URLs, failed tools, error lines, requests and open TODOs a history
mentions (docs/behaviour.md); here it runs on the entries a compaction replaced, read from
its archive (the stored history's messages when there is none), against the summary alone,
its state block's brace groups written out (`compaction.expand_path_groups`). The session
state the summary must keep is checked with the quality benchmark's definitions
(`compaction.state_recall`, docs/behaviour.md#what-a-summary-always-keeps): the touched
files, todo items and unresolved errors it no longer holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from compaction import expand_path_groups, extract_identifiers, measure_recall, state_recall
from sessions_app.models import Compaction, Message
from sessions_app.services.compacting.archives import ArchiveUnavailable, read_archive

__all__ = ["LostIdentifiers", "lost_identifiers"]

Source = Literal["archive", "history", "none"]


@dataclass(frozen=True)
class LostIdentifiers:
    """The identifiers of a compaction's originals and which of them its summary omits.

    `source` says where the originals came from: the compaction's archive, the stored
    history (no readable archive), or nowhere (nothing to compare: `total` is 0).
    """

    total: int
    missing: tuple[str, ...]
    source: Source
    #: The session state the summary no longer holds (`compaction.state_recall`).
    missing_files: tuple[str, ...] = ()
    missing_todos: tuple[str, ...] = ()
    missing_errors: tuple[str, ...] = ()

    @property
    def missing_state(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The kinds of state item the summary lost, each with its missing items."""
        kinds = (
            ("touched files", self.missing_files),
            ("todo items", self.missing_todos),
            ("unresolved errors", self.missing_errors),
        )
        return tuple((kind, items) for kind, items in kinds if items)

    @property
    def kept(self) -> int:
        """How many identifiers the summary still mentions."""
        return self.total - len(self.missing)

    @property
    def recall(self) -> float | None:
        """The share of identifiers kept (None when there were none to keep)."""
        return self.kept / self.total if self.total else None


def _originals(compaction: Compaction) -> tuple[list[dict[str, Any]], Source]:
    """The messages the compaction replaced, and where they were read from."""
    if compaction.archive:
        try:
            archive = read_archive(compaction)
        except ArchiveUnavailable:
            pass  # an unreadable archive: the stored history still has the originals
        else:
            return [dict(entry.message) for entry in archive.entries if entry.message], "archive"
    if compaction.first_seq is None or compaction.last_seq is None:
        return [], "none"
    rows = Message.objects.filter(
        session_id=compaction.session_id,
        seq__gte=compaction.first_seq,
        seq__lte=compaction.last_seq,
    ).order_by("seq")
    return [row.as_dict() for row in rows], "history"


def _summary_messages(summary: str) -> Sequence[dict[str, Any]]:
    text = expand_path_groups(summary)
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def lost_identifiers(compaction: Compaction) -> LostIdentifiers:
    """The identifiers of `compaction`'s originals that its summary does not mention."""
    messages, source = _originals(compaction)
    if not messages:
        return LostIdentifiers(total=0, missing=(), source="none")
    identifiers = extract_identifiers(messages)
    summary = _summary_messages(compaction.summary)
    _, missing = measure_recall(identifiers, summary)
    state = state_recall(messages, summary)
    return LostIdentifiers(
        total=len(identifiers),
        missing=tuple(missing),
        source=source,
        missing_files=state.missing_files,
        missing_todos=state.missing_todos,
        missing_errors=state.missing_errors,
    )
