"""One compaction in detail: the entries it replaced beside the summary that replaced them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app.services.compacting.archives import ArchivedEntry as StoredEntry
from sessions_app.services.compacting.archives import ArchiveUnavailable, read_archive
from sessions_app.viewmodels.blocks import build_message_views

from .common import owned_compaction
from .failures import service_errors

__all__ = ["ArchivedEntry", "compaction_compare"]

#: Archived entries shown at most (the archive file itself holds them all).
MAX_ARCHIVED: int = 200


@dataclass(frozen=True)
class ArchivedEntry:
    """An entry from a compaction's archive, shaped like a message for the templates."""

    seq: int | None
    role: str
    content: Any
    extra: Any
    token_count: int
    created_at: datetime | None = None

    @classmethod
    def from_stored(cls, item: StoredEntry) -> ArchivedEntry:
        """From one replaced entry of an archive."""
        message = item.message
        extra = {k: v for k, v in message.items() if k not in {"role", "content"}}
        return cls(
            seq=item.seq,
            role=str(message.get("role", item.role)),
            content=message.get("content", item.content),
            extra=extra,
            token_count=item.token_count,
        )


@login_required
@require_GET
@service_errors
def compaction_compare(request: HttpRequest, session_id: uuid.UUID, number: int) -> HttpResponse:
    """Before (the exact entries the compaction replaced) vs after (its summary).

    An unreadable archive is shown as a notice in the "before" column, not as a failure:
    the summary (the "after" column) is still worth showing.
    """
    compaction = owned_compaction(request, session_id, number)
    error = ""
    entries: list[ArchivedEntry] = []
    try:
        entries = [ArchivedEntry.from_stored(i) for i in read_archive(compaction).entries]
    except ArchiveUnavailable as problem:
        error = str(problem)
    context = {
        "session": compaction.session,
        "compaction": compaction,
        "before": build_message_views(entries[:MAX_ARCHIVED]),
        "before_count": len(entries),
        "before_tokens": sum(e.token_count for e in entries),
        "more": max(0, len(entries) - MAX_ARCHIVED),
        "archive_error": error,
    }
    return render(request, "sessions/_log.html#compare", context)
