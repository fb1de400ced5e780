"""The usage an agent reported on the newest message that carries one, and whether a
compaction came after it (a change of the context clears the session's `last_usage`: the
figure described a context that is gone, docs/behaviour.md#runtime-context-and-history)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessions_app.models import Compaction, Message, Session

__all__ = ["MessageUsage", "newest_message_usage"]


@dataclass(frozen=True)
class MessageUsage:
    """The `usage` of message `seq`; `superseded_by`: the newest compaction (any kind that
    succeeded: a summary, an offload) stored since that message, None when there is none."""

    seq: int
    usage: Mapping[str, Any]
    superseded_by: int | None


def newest_message_usage(session: Session) -> MessageUsage | None:
    """The newest assistant message of `session` with a reported `usage` (two queries)."""
    row = (
        Message.objects.filter(session=session, role="assistant", extra__has_key="usage")
        .order_by("-seq")
        .values_list("seq", "extra", "created_at")
        .first()
    )
    if row is None:
        return None
    seq, extra, created_at = row
    usage = extra.get("usage") if isinstance(extra, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    # A message's time is when it was written (or its transcript's time, earlier still):
    # a compaction stored at or after it came after the call that reported the usage.
    newer = (
        Compaction.objects.filter(
            session=session, status=Compaction.Status.SUCCEEDED, created_at__gte=created_at
        )
        .order_by("-number")
        .values_list("number", flat=True)
        .first()
    )
    return MessageUsage(seq, usage, newer)
