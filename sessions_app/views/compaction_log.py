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

from compaction import ArchiveError
from sessions_app.services.reverting import read_archive
from sessions_app.viewmodels.blocks import build_message_views

from .common import owned_compaction

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
    def from_snapshot(cls, item: dict[str, Any]) -> ArchivedEntry:
        """From one `entries` item of an archive document."""
        found = item.get("message")
        message: dict[str, Any] = found if isinstance(found, dict) else {}
        extra = {k: v for k, v in message.items() if k not in {"role", "content"}}
        seq = item.get("seq")
        return cls(
            seq=seq if isinstance(seq, int) else None,
            role=str(message.get("role", item.get("role", ""))),
            content=message.get("content", item.get("content")),
            extra=extra,
            token_count=int(item.get("token_count") or 0),
        )


@login_required
@require_GET
def compaction_compare(request: HttpRequest, session_id: uuid.UUID, number: int) -> HttpResponse:
    """Before (the exact entries the compaction replaced) vs after (its summary)."""
    compaction = owned_compaction(request, session_id, number)
    error = ""
    entries: list[ArchivedEntry] = []
    try:
        document = read_archive(compaction)
        raw = document.get("entries", [])
        entries = [ArchivedEntry.from_snapshot(i) for i in raw if isinstance(i, dict)]
    except ArchiveError as problem:
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
