"""A session's counters and caches, kept by one writer: `advance`.

A `Session` row caches what its rows say (docs/architecture.md, "A request for the
context"): the totals of its history (`message_count`, `history_tokens`) and of its runtime
context (`context_entry_count`, `context_tokens`, `compaction_count`), the state that
stamps a cached context response (`version`, `context_revision`), and `last_usage`, the
model's count of that context. Every write that changes messages or context entries
(append, the proxy's append and answer, an import's merge, compaction, offload, revert)
describes what it did as a `Change` and has `advance` set the counters on the locked row;
`advance` returns the fields it changed, which the caller writes in its own UPDATE or
`save(update_fields=...)` (the proxy writes the row once per request:
services/proxying/turns.py). The rules, in one place:

- anything written to the rows is a new `version`;
- a change to existing entries is a new `context_revision` too: the context totals are
  counted again from the entries, `last_usage` is cleared unless the change itself
  reported a usage (the model's count of the context before it no longer describes it:
  docs/behaviour.md#runtime-context-and-history), and the stored context response is
  rebuilt once the transaction commits (`context_text.refresh_after_commit`);
- appends only add their counts, so no append reads the session's other rows.

`next_seq` and `next_position` are not counters but where the next row goes: the code
writing rows moves them (`entries.append_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Literal

from django.db.models import Count, Sum
from django.utils import timezone

from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.context.text import refresh_after_commit

__all__ = [
    "APPENDED_FIELDS",
    "KEEP",
    "STATE_FIELDS",
    "Change",
    "ReportedUsage",
    "advance",
    "recounted",
]


class _Keep(Enum):
    KEEP = "keep"


#: `Change(usage=KEEP)`: the change reported no usage of its own.
KEEP: Final = _Keep.KEEP
#: A usage a change reports (`services/sessions/usage.reported_usage`), or KEEP.
ReportedUsage = Mapping[str, Any] | Literal[_Keep.KEEP]

#: The fields an append changes (`advance` of an append's `Change`), with the row cursors.
APPENDED_FIELDS: Final = (
    "next_seq",
    "next_position",
    "message_count",
    "context_entry_count",
    "history_tokens",
    "context_tokens",
    "version",
    "updated_at",
)


#: Every field `advance` may change, with the row cursors: what a copy of the row copies.
STATE_FIELDS: Final = (
    *APPENDED_FIELDS,
    "context_revision",
    "compaction_count",
    "last_usage",
)


@dataclass(frozen=True, slots=True)
class Change:
    """What one write did to a session's rows.

    `appended`/`appended_tokens`: messages added to the history, each with a live entry
    at the context's end. `rewritten_tokens`: how the history's tokens changed by messages
    rewritten in place (an import's merge). `entries_changed`: existing context entries
    were replaced, rewritten or restored. `usage`: the `last_usage` the change reports
    (`reported_usage`), KEEP when it reports none.
    """

    appended: int = 0
    appended_tokens: int = 0
    rewritten_tokens: int = 0
    entries_changed: bool = False
    usage: ReportedUsage = KEEP

    @classmethod
    def of_rows(cls, rows: Sequence[Message], **fields: Any) -> Change:
        """The change of appending `rows` (and `fields`)."""
        return cls(len(rows), sum(row.token_count for row in rows), **fields)

    @property
    def writes_rows(self) -> bool:
        """True when messages or entries changed (a new version)."""
        return bool(self.appended or self.rewritten_tokens or self.entries_changed)


def advance(session: Session, change: Change) -> dict[str, Any]:
    """Set the counters of the locked `session` after `change`; the fields that changed,
    with their values, for the caller's write (nothing is saved here)."""
    changes: dict[str, Any] = {}
    if change.writes_rows:
        changes["message_count"] = session.message_count + change.appended
        changes["history_tokens"] = (
            session.history_tokens + change.appended_tokens + change.rewritten_tokens
        )
        changes["version"] = session.version + 1
        changes["updated_at"] = timezone.now()
    if change.entries_changed:
        changes.update(recounted(session))
        changes["context_revision"] = session.context_revision + 1
        changes["last_usage"] = None  # unless the change reported one (below)
        refresh_after_commit(session.pk)  # the stored context response, for the next read
    elif change.appended:
        changes["context_entry_count"] = session.context_entry_count + change.appended
        changes["context_tokens"] = session.context_tokens + change.appended_tokens
    if change.usage is not KEEP:
        changes["last_usage"] = dict(change.usage)
    for name, value in changes.items():
        setattr(session, name, value)
    return changes


def recounted(session: Session) -> dict[str, int]:
    """The context totals of `session` counted from its entries and compactions."""
    totals = ContextEntry.objects.filter(session=session).aggregate(
        tokens=Sum("token_count"), count=Count("id")
    )
    succeeded = Compaction.objects.filter(session=session, status=Compaction.Status.SUCCEEDED)
    return {
        "context_tokens": int(totals["tokens"] or 0),
        "context_entry_count": int(totals["count"] or 0),
        "compaction_count": succeeded.points().count(),
    }
