"""Offloading a session's large tool results to files (docs/behaviour.md#offloading) through
Django's storage.

Only the runtime context changes (ContextEntry.content holds the reference); the full
history's Message rows keep the original results.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from compaction import BlobStoreError, message_token_counts, offload_tool_results

from ..models import ContextEntry, Session
from ..storage import BLOB_PREFIX, DjangoStorageBlobStore
from .entries import ENTRY_KEY, split_message, tagged_message
from .errors import Conflict, engine_error
from .policies import profile_for
from .sessions import refresh_totals
from .writeback import ContextSnapshot, refresh_session_totals, take_snapshot

__all__ = ["OffloadResult", "blob_store_for", "offload_session"]

logger = logging.getLogger("sessions_app")


def blob_store_for(session: Session) -> DjangoStorageBlobStore:
    """The per-session blob store: `offload/<session id>/` in the default storage."""
    return DjangoStorageBlobStore(f"{BLOB_PREFIX}/{session.pk}")


@dataclass(frozen=True, slots=True)
class OffloadResult:
    """What an offload did; `files` are names relative to the session's offload area."""

    offloaded_count: int
    freed_chars: int
    files: tuple[str, ...]
    entries_changed: int
    tokens_before: int
    tokens_after: int


def offload_session(session: Session, *, min_chars: int | None = None) -> OffloadResult:
    """Write every tool result of `min_chars`+ characters (default: the profile's) to a file.

    `files` are the names written, relative to the session's offload area
    (`tool-result-<id>.md`, as the references in the context say), never the storage's
    locations (server paths, signed URLs). Raises Conflict when the context changed
    meanwhile, Unavailable when the storage fails (nothing is changed then).
    """
    profile = profile_for(session)
    threshold = profile.offload_min_chars if min_chars is None else min_chars
    snapshot = take_snapshot(session)
    entries = [*snapshot.entries, *snapshot.pending]
    messages = [*snapshot.messages, *_pending_messages(snapshot)]
    store = _NamesWritten(blob_store_for(session))
    try:
        result = offload_tool_results(messages, None, min_chars=threshold, store=store)
    except BlobStoreError as error:
        raise engine_error(error) from error
    changed = [
        (entry, new)
        for entry, old, new in zip(entries, messages, result.messages, strict=True)
        if new is not old
    ]
    tokens_before = snapshot.tokens
    if changed:
        counts = message_token_counts(
            [{k: v for k, v in new.items() if k != ENTRY_KEY} for _, new in changed],
            profile.encoding,
        )
        _commit(snapshot, changed, counts)
    refresh_totals(session)
    logger.info(
        "tool results offloaded: %d",
        result.offloaded_count,
        extra={"session_id": str(session.pk), "offloaded_count": result.offloaded_count},
    )
    return OffloadResult(
        offloaded_count=result.offloaded_count,
        freed_chars=result.freed_chars,
        files=tuple(store.names),
        entries_changed=len(changed),
        tokens_before=tokens_before,
        tokens_after=session.context_tokens,
    )


class _NamesWritten:
    """An ExclusiveBlobStore that remembers the relative names created through it (the
    engine then creates each file exclusively: a concurrent offload never replaces one)."""

    def __init__(self, store: DjangoStorageBlobStore) -> None:
        self.store = store
        self.names: list[str] = []

    def write(self, name: str, data: bytes) -> str:
        location = self.create(name, data)
        if location is None:
            raise BlobStoreError(f"{name} exists already")
        return location

    def create(self, name: str, data: bytes) -> str | None:
        location = self.store.create(name, data)
        if location is not None:
            self.names.append(name)
        return location

    def exists(self, name: str) -> bool:
        return self.store.exists(name)


def _pending_messages(snapshot: ContextSnapshot) -> list[dict[str, Any]]:
    return [tagged_message(entry) for entry in snapshot.pending]


def _commit(
    snapshot: ContextSnapshot,
    changed: list[tuple[ContextEntry, dict[str, Any]]],
    counts: list[int],
) -> None:
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=snapshot.session.pk)
        if locked.context_revision != snapshot.revision:
            raise Conflict("the session's context changed while offloading; try again")
        for (entry, message), tokens in zip(changed, counts, strict=True):
            _, content, _ = split_message(message)
            entry.content = content
            entry.token_count = tokens
            entry.save(update_fields=["content", "token_count"])
        refresh_session_totals(locked, bump_revision=True)
