"""Rows to engine messages and back: Message and ContextEntry as Anthropic-style dicts; new
messages stored with their context entries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sessions_app.models import ContextEntry, Message, Session

__all__ = [
    "ENTRY_KEY",
    "append_rows",
    "entry_message",
    "load_entries",
    "split_message",
    "tagged_message",
]

#: Extra key carrying a context entry's id through the engine (extra keys pass untouched),
#: so transformed messages can be matched to the entry they came from.
ENTRY_KEY: Final = "ctxweb_entry"


def split_message(message: Mapping[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """(role, content, extra keys) of an engine message."""
    extra = {k: v for k, v in message.items() if k not in {"role", "content", ENTRY_KEY}}
    return str(message.get("role", "")), message.get("content"), extra


def load_entries(session: Session) -> list[ContextEntry]:
    """The runtime context's entries in order, with their messages."""
    return list(
        ContextEntry.objects.filter(session=session).select_related("message").order_by("position")
    )


def entry_message(entry: ContextEntry) -> dict[str, Any]:
    """The engine message an entry stands for: the (maybe transformed) content and extras."""
    base = entry.message.extra if entry.message is not None else {}
    content = entry.content
    if content is None and entry.message is not None:
        content = entry.message.content
    return {**base, **entry.extra, "role": entry.role, "content": content}


def tagged_message(entry: ContextEntry) -> dict[str, Any]:
    """`entry_message` with the entry's id under ENTRY_KEY."""
    return {**entry_message(entry), ENTRY_KEY: entry.pk}


def append_rows(session: Session, rows: Sequence[Message]) -> None:
    """Insert `rows`, new messages numbered from `session.next_seq` on, each with a live
    context entry at the end of the context, and move the session's `next_seq` and
    `next_position` past them (not saved: the caller counts them, `session_state.advance`,
    and saves the session). `session` must be locked.

    Two INSERTs whatever the number of rows (appends and imports: services/sessions/lifecycle.py,
    services/importing/merge.py).
    """
    if not rows:
        return
    Message.objects.bulk_create(rows)
    position = session.next_position
    ContextEntry.objects.bulk_create(
        ContextEntry(
            session=session,
            position=position + offset,
            kind=ContextEntry.Kind.MESSAGE,
            message=row,
            role=row.role,
            token_count=row.token_count,
        )
        for offset, row in enumerate(rows)
    )
    session.next_seq += len(rows)
    session.next_position += len(rows)
