"""The one tree of a session's compaction markers, shared by the API and the pages.

A succeeded compaction folds the original messages `first_seq..last_seq` behind one
marker. Its children are the compactions it summarized again (their `parent` is it), so
their ranges nest inside its range. `GET /api/sessions/{id}/history` (its `compactions`)
and the history tab draw this same tree.

Only succeeded compactions are in the tree: a failed or a reverted compaction folds
nothing, so it has no children here; nor does an offload's record (`Compaction.is_offload`,
services/compacting/offloading.py), which changes entries in place and has no marker. A compaction
whose recorded parent is failed or reverted hangs from the nearest succeeded ancestor up the
parent chain (whose range holds its range), or is at the top when there is none.
(Reverting a compaction also unlinks its children; the rule covers imported or older data
where the link stayed.)

Pure arrangement: no queries (the selectors read the rows, sessions_app/selectors/compactions.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from sessions_app.models import Compaction

__all__ = ["CompactionTree"]


def _timeline_key(compaction: Compaction) -> tuple[int, int]:
    """Siblings in timeline order: by first message (rangeless first), then number."""
    first = compaction.first_seq if compaction.first_seq is not None else -1
    return (first, compaction.number)


class CompactionTree:
    """The succeeded compactions of one session, arranged by their effective parents."""

    def __init__(self, compactions: Iterable[Compaction]) -> None:
        everything = {c.pk: c for c in compactions}
        self.by_number = {c.number: c for c in everything.values()}
        self.active = {
            pk: c
            for pk, c in everything.items()
            if c.status == Compaction.Status.SUCCEEDED and c.is_point
        }
        self._parent: dict[int, int | None] = {
            pk: self._effective_parent(c, everything) for pk, c in self.active.items()
        }
        self._break_cycles()
        self._children: dict[int | None, list[Compaction]] = {}
        for pk, parent_id in self._parent.items():
            self._children.setdefault(parent_id, []).append(self.active[pk])
        for siblings in self._children.values():
            siblings.sort(key=_timeline_key)

    def _effective_parent(
        self, compaction: Compaction, everything: dict[int, Compaction]
    ) -> int | None:
        """The nearest succeeded ancestor up the parent chain (None: top level)."""
        parent_id = compaction.parent_id
        seen: set[int] = set()
        while parent_id is not None and parent_id not in self.active and parent_id not in seen:
            seen.add(parent_id)  # a cycle in stored data must not hang the page
            ancestor = everything.get(parent_id)
            parent_id = ancestor.parent_id if ancestor else None
        return parent_id if parent_id in self.active else None

    def _break_cycles(self) -> None:
        """A compaction that is its own ancestor (only bad stored data can say so) goes to
        the top level, so every compaction of the tree is reachable from the roots."""
        for pk in sorted(self._parent, key=lambda key: self.active[key].number):
            seen = {pk}
            parent_id = self._parent[pk]
            while parent_id is not None:
                if parent_id in seen:
                    self._parent[pk] = None
                    break
                seen.add(parent_id)
                parent_id = self._parent.get(parent_id)

    @property
    def roots(self) -> list[Compaction]:
        """The top-level compactions, in timeline order."""
        return self.children(None)

    def children(self, compaction: Compaction | None) -> list[Compaction]:
        """Direct children of `compaction` (timeline order), or the top level for None."""
        return self._children.get(compaction.pk if compaction else None, [])

    def parent(self, compaction: Compaction) -> Compaction | None:
        """The effective parent of a compaction in the tree (None at the top level)."""
        parent_id = self._parent.get(compaction.pk)
        return self.active.get(parent_id) if parent_id is not None else None

    def depth(self, compaction: Compaction) -> int:
        """0 for a top-level compaction, 1 for its children, and so on."""
        depth = 0
        parent_id = self._parent.get(compaction.pk)
        while parent_id is not None:
            depth += 1
            parent_id = self._parent.get(parent_id)
        return depth

    def is_top_level(self, compaction: Compaction) -> bool:
        """True for a succeeded compaction no other active compaction re-summarized: the
        only kind that can be reverted as it is."""
        return compaction.pk in self.active and self._parent.get(compaction.pk) is None

    def descendant_count(self, compaction: Compaction) -> int:
        """How many compactions are nested inside `compaction`, at any depth."""
        return sum(1 + self.descendant_count(c) for c in self.children(compaction))
