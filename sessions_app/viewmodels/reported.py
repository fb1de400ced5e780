"""What the gauge says about the usage the agent reported (`_live.html#gauge_source`).

The session's `last_usage` is the figure that applies. Without one, the newest message that
reported a usage still tells the reader something: when a compaction came after it, the
figure no longer applies and the page says which compaction reset it (it used to say "No
usage reported by the agent yet" beside messages showing their usage); when none did (an
import that kept no `last_usage`), that message's usage is the one shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions_app.models import Session
from sessions_app.selectors.usage import newest_message_usage

from .blocks import UsageView, usage_view

__all__ = ["ReportedUsage", "reported_usage"]


@dataclass(frozen=True)
class ReportedUsage:
    """`current`: the reported usage that applies (None: none does). `stale`: the newest
    message's usage when compaction `reset_by` came after it; `seq`: that message."""

    current: UsageView | None
    stale: UsageView | None = None
    seq: int | None = None
    reset_by: int | None = None


def reported_usage(session: Session) -> ReportedUsage:
    """The reported usage the gauge shows for `session`, as loaded."""
    current = usage_view(session.last_usage)
    if current is not None:
        return ReportedUsage(current)
    newest = newest_message_usage(session)
    view = usage_view(newest.usage) if newest is not None else None
    if newest is None or view is None:
        return ReportedUsage(None)
    if newest.superseded_by is None:
        return ReportedUsage(view, seq=newest.seq)
    return ReportedUsage(None, stale=view, seq=newest.seq, reset_by=newest.superseded_by)
