"""Offloading a session's large tool results to files (docs/behaviour.md#offloading) through
Django's storage.

Only the runtime context changes (ContextEntry.content holds the reference); the full
history's Message rows keep the original results. Each offload that moves something is
recorded in the compaction log as a Compaction row (`Compaction.Kind.OFFLOAD`, the files it wrote
in `details["offload"]`) with an archive of the entries as they were, so it is undone like
any compaction: `revert_compaction` (services/compacting/reverting.py) puts the results back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from compaction import (
    BlobStoreError,
    Policy,
    message_token_counts,
    offload_tool_results,
)
from sessions_app.models import Compaction, Session
from sessions_app.services.compacting.writeback import (
    CommitMeta,
    ContextSnapshot,
    commit_context,
    take_snapshot,
)
from sessions_app.services.errors import engine_error
from sessions_app.services.sessions.entries import ENTRY_KEY
from sessions_app.services.sessions.lifecycle import reload_totals
from sessions_app.services.sessions.policies import policy_for, profile_for
from sessions_app.storage import BLOB_PREFIX, DjangoStorageBlobStore, delete_stored_quietly

__all__ = ["OffloadResult", "blob_store_for", "offload_session"]

logger = logging.getLogger("sessions_app")


def blob_store_for(session: Session) -> DjangoStorageBlobStore:
    """The per-session blob store: `offload/<session id>/` in the default storage."""
    return DjangoStorageBlobStore(f"{BLOB_PREFIX}/{session.pk}")


@dataclass(frozen=True, slots=True)
class OffloadResult:
    """What an offload did; `files` are names relative to the session's offload area;
    `compaction` is the number of its record in the compaction log (None: nothing moved)."""

    offloaded_count: int
    freed_chars: int
    files: tuple[str, ...]
    entries_changed: int
    tokens_before: int
    tokens_after: int
    compaction: int | None = None


def offload_session(
    session: Session, *, min_chars: int | None = None, trigger: str = Compaction.Trigger.MANUAL
) -> OffloadResult:
    """Write every tool result of `min_chars`+ characters (default: the profile's) to a file.

    `files` are the names written, relative to the session's offload area
    (`tool-result-<id>.md`, as the references in the context say), never the storage's
    locations (server paths, signed URLs). The change is committed in one transaction with
    its Compaction record and archive. Raises Conflict when the context changed meanwhile,
    Unavailable when the storage fails (nothing is changed then).
    """
    profile = profile_for(session)
    policy = policy_for(session, profile)
    threshold = profile.offload_min_chars if min_chars is None else min_chars
    snapshot = take_snapshot(session)
    store = _NamesWritten(blob_store_for(session))
    started = time.monotonic()
    try:
        result = offload_tool_results(snapshot.messages, None, min_chars=threshold, store=store)
    except BlobStoreError as error:
        raise engine_error(error) from error
    tokens_before = snapshot.tokens
    changed = [
        (index, new)
        for index, (old, new) in enumerate(zip(snapshot.messages, result.messages, strict=True))
        if new is not old
    ]
    number = None
    if changed:
        meta = _meta(policy, snapshot, changed, store, result, threshold, trigger, started)
        try:
            number = commit_context(snapshot, result.messages, meta).number
        except BaseException:
            _delete_written(session, store.names)  # nothing half-written is left behind
            raise
    reload_totals(session)
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
        compaction=number,
    )


def _meta(
    policy: Policy,
    snapshot: ContextSnapshot,
    changed: list[tuple[int, dict[str, Any]]],
    store: _NamesWritten,
    result: Any,
    threshold: int,
    trigger: str,
    started: float,
) -> CommitMeta:
    """The compaction-log record of an offload: its files, sizes and the tokens it freed."""
    encoding = policy.encoding
    counts = message_token_counts(
        [{k: v for k, v in new.items() if k != ENTRY_KEY} for _, new in changed], encoding
    )
    before = sum(snapshot.token_counts)
    after = before - sum(snapshot.token_counts[i] for i, _ in changed) + sum(counts)
    return CommitMeta(
        trigger=trigger,
        strategy=Compaction.Kind.OFFLOAD,
        encoding=encoding,
        stats={
            "original_token_count": before,
            "compacted_token_count": after,
            "compaction_ratio": after / before if before else None,
        },
        duration_ms=round((time.monotonic() - started) * 1000),
        details={
            "policy": policy.to_dict(),
            "offload": {
                "min_chars": threshold,
                "offloaded_count": result.offloaded_count,
                "freed_chars": result.freed_chars,
                "files": [{"name": n, "bytes": b} for n, b in store.sizes.items()],
            },
        },
    )


def _delete_written(session: Session, names: list[str]) -> None:
    for name in names:
        delete_stored_quietly(f"{BLOB_PREFIX}/{session.pk}/{name}")


class _NamesWritten:
    """An ExclusiveBlobStore that remembers the relative names (and sizes) created through
    it (the engine then creates each file exclusively: a concurrent offload never replaces
    one)."""

    def __init__(self, store: DjangoStorageBlobStore) -> None:
        self.store = store
        self.names: list[str] = []
        self.sizes: dict[str, int] = {}

    def write(self, name: str, data: bytes) -> str:
        location = self.create(name, data)
        if location is None:
            raise BlobStoreError(f"{name} exists already")
        return location

    def create(self, name: str, data: bytes) -> str | None:
        location = self.store.create(name, data)
        if location is not None:
            self.names.append(name)
            self.sizes[name] = len(data)
        return location

    def exists(self, name: str) -> bool:
        return self.store.exists(name)
