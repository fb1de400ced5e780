"""Entries of a session's runtime context (what the model sees now)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from django.db.models import BooleanField, ExpressionWrapper, Q, TextField
from django.db.models.functions import Cast, Coalesce

from compaction import SUMMARY_KEY
from sessions_app.models import ContextEntry, Session

__all__ = [
    "EntryTokens",
    "compare_entries",
    "entries_with_messages",
    "entry_tokens",
    "in_context_message_ids",
]

#: (kind, role, token count, marked as a summary, content as JSON text) of one entry.
EntryTokens = tuple[str, str, int, bool, str | None]


def in_context_message_ids(session: Session, message_ids: Collection[int]) -> set[int]:
    """Which of the messages `message_ids` have an entry in the runtime context."""
    rows = ContextEntry.objects.filter(session=session, message_id__in=list(message_ids))
    return set(rows.values_list("message_id", flat=True))


def entries_with_messages(session: Session | None, entry_ids: Iterable[Any]) -> list[ContextEntry]:
    """The entries `entry_ids` (of `session` when given) with their messages, by position."""
    rows = ContextEntry.objects.filter(pk__in=list(entry_ids)).select_related("message")
    if session is not None:
        rows = rows.filter(session=session)
    return list(rows.order_by("position"))


def entry_tokens(session: Session) -> Iterable[EntryTokens]:
    """Each entry's kind, role, tokens, summary mark and content (as JSON text), by
    position: one query, contents left as text so only tool entries need decoding."""
    raw = Cast(Coalesce("content", "message__content"), output_field=TextField())
    marked = ExpressionWrapper(Q(extra__has_key=SUMMARY_KEY), output_field=BooleanField())
    rows = ContextEntry.objects.filter(session=session).order_by("position")
    return rows.values_list("kind", "role", "token_count", marked, raw)


def compare_entries(session: Session) -> list[dict[str, Any]]:
    """Every entry as a dict (pk, position, kind, role, token_count, compaction_id,
    changed, message__seq, message__token_count), by position; `changed` is true for an
    entry whose content differs from its message's."""
    changed = ExpressionWrapper(Q(content__isnull=False), output_field=BooleanField())
    rows = ContextEntry.objects.filter(session=session).order_by("position")
    return [
        dict(row)
        for row in rows.annotate(changed=changed).values(
            "pk",
            "position",
            "kind",
            "role",
            "token_count",
            "compaction_id",
            "changed",
            "message__seq",
            "message__token_count",
        )
    ]
