"""What a live session page needs to catch up with its session (README, "The pages").

The page carries the stamp of the state it drew (sessions_app/selectors/changes.py). When
only messages were appended since, the new ones are drawn to be added at the end of the
history; when existing entries changed (a compaction, a revert, an offload: the markers may
differ), or too much arrived to append, the history is drawn again whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sessions_app.models import Session
from sessions_app.selectors.changes import SessionStamp, messages_since
from sessions_app.selectors.subagents import subagent_links

from .blocks import MessageView, build_message_views
from .history import HistoryWindow, MarkerTree, history_window

__all__ = ["APPEND_LIMIT", "LiveUpdate", "live_update"]

#: More new messages than this redraw the history's newest window instead of appending.
APPEND_LIMIT: Final = 40


@dataclass(frozen=True)
class LiveUpdate:
    """The history part of a live update: a redrawn window, or rows to append.

    `replaced` is the last message the page already shows, drawn again because a tool call
    in it got its result among the new rows (the result is shown inside the call's row).
    """

    window: HistoryWindow | None = None
    tree: MarkerTree | None = None
    appended: tuple[MessageView, ...] = ()
    replaced: MessageView | None = None

    @property
    def rebuilt(self) -> bool:
        """True when the whole history is drawn again."""
        return self.window is not None


def _rebuild(session: Session) -> LiveUpdate:
    tree = MarkerTree.for_session(session)
    return LiveUpdate(window=history_window(session, tree=tree), tree=tree)


def _answered(previous: MessageView) -> bool:
    """True when a tool call of `previous` got its result from a later (new) message."""
    return any(
        b.kind == "tool_call" and b.result is not None and b.result.seq != previous.seq
        for b in previous.blocks
    )


def _shown_at_top(session: Session, seq: int) -> bool:
    """True when message `seq` is drawn at the top level (no marker folds it)."""
    tree = MarkerTree.for_session(session)
    return not any(
        c.first_seq is not None and c.last_seq is not None and c.first_seq <= seq <= c.last_seq
        for c in tree.children(None)
    )


def live_update(session: Session, since: SessionStamp | None, now: SessionStamp) -> LiveUpdate:
    """How the history drawn at stamp `since` catches up with `now`."""
    if (
        since is None
        or since.revision != now.revision
        or since.next_seq <= 0
        or since.next_seq > now.next_seq
    ):
        return _rebuild(session)
    if since.next_seq == now.next_seq:
        return LiveUpdate()
    rows, more = messages_since(
        session, since.next_seq - 1, before=now.next_seq, limit=APPEND_LIMIT + 1
    )
    if more or not rows or rows[0].seq != since.next_seq - 1:
        return _rebuild(session)
    views = build_message_views(rows, subagents=subagent_links(session))
    previous, appended = views[0], views[1:]
    replaced = None
    if _answered(previous) and _shown_at_top(session, previous.seq or 0):
        replaced = previous
    return LiveUpdate(appended=tuple(appended), replaced=replaced)
