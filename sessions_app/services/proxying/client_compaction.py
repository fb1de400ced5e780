"""A compaction the client made itself, seen through the proxy (Codex: README, "The proxy").

Codex compacts its own history: a custom provider asks the model for a checkpoint summary
(a plain request without tools), the built-in one asks the server (a trailing
`compaction_trigger` item; the answer is one `compaction` item whose summary is encrypted).
The request is forwarded and not stored as a turn; its answer becomes a compaction point of
the session, as an import records one (trigger `imported`, the stored context up to now
replaced by the summary and archived; an encrypted summary is opaque, and says so).

The client then sends a new window: its own history rewritten around the summary. The
conversation goes on in the same session: the session's prefix map starts again at its
current end (the next request of the conversation continues it whatever it holds), and while
the context is the one the client's compaction left, requests are forwarded as sent (the
client's window already holds the summary; a compaction of ctxweb's later replaces both).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from django.contrib.auth.models import User
from django.db import transaction

from sessions_app.importers import ImportedCompaction, ImportedSession
from sessions_app.importers.provider_compaction import PROVIDER_TRIGGER, provider_compaction
from sessions_app.models import Session
from sessions_app.services.importing.merge import merge_imported
from sessions_app.services.sessions.lifecycle import sessions_for

__all__ = ["ClientCompaction", "forwarded_as_sent", "record_client_compaction", "restarted_state"]

#: The `proxy_state` key holding the context revision a client's compaction left.
_WINDOW: Final = "client_compaction"
#: What the trigger of a client's summary (not the provider's encrypted one) is called.
CLIENT_TRIGGER: Final = "client"
#: The prefix map's keys in `proxy_state` (services/proxying/prefix_map.py, turns._keep_map).
_MAP_KEYS: Final = ("map", "digests", "raw", "starts", "aliases", "answered", "last")


@dataclass(frozen=True)
class ClientCompaction:
    """What the client's compaction produced: a summary text, or a provider `compaction`
    item (encrypted), with the client's ids for it."""

    summary: str = ""
    item: Mapping[str, Any] | None = None
    response_id: str = ""
    window: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def record_client_compaction(
    owner: User, key: str, provider: str, compaction: ClientCompaction
) -> uuid.UUID | None:
    """Record `compaction` as a compaction point of the newest session of the conversation
    `key` (the proxy's conversation key); None when there is none or nothing to record."""
    if compaction.item is None and not compaction.summary.strip():
        return None
    keyed = sessions_for(owner).filter(proxy_key=key[:200]).order_by("-updated_at")
    found = next(
        (
            pk
            for pk, state in keyed.values_list("pk", "proxy_state")[:20]
            if isinstance(state, Mapping) and state.get("provider") == provider
        ),
        None,
    )
    if found is None:
        return None
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=found)
        merge_imported(locked, _imported(locked, compaction), start_seq=locked.next_seq)
        state = restarted_state(locked.proxy_state, locked.next_seq)
        state[_WINDOW] = locked.context_revision
        Session.objects.filter(pk=locked.pk).update(proxy_state=state)
    return found


def restarted_state(state: Any, offset: int) -> dict[str, Any]:
    """A session's `proxy_state` with its prefix map started again at `offset` (its
    `next_seq`): any next request of the conversation continues it."""
    kept = state if isinstance(state, Mapping) else {}
    return {**{k: v for k, v in kept.items() if k not in _MAP_KEYS}, "offset": offset}


def _imported(session: Session, compaction: ClientCompaction) -> ImportedSession:
    raw: dict[str, Any] = {"client": True, "window": compaction.window, **compaction.details}
    summary, trigger = compaction.summary.strip(), CLIENT_TRIGGER
    if compaction.item is not None:
        found = provider_compaction(compaction.item, "openai")
        summary, trigger = found.summary, PROVIDER_TRIGGER
        raw.update(found.raw)  # the item itself too: its encrypted summary is kept
    point = ImportedCompaction(
        first_index=None,
        last_index=None,
        summary=summary,
        trigger=trigger,
        original_id=compaction.response_id or compaction.window,
        raw=raw,
    )
    return ImportedSession(source_format=session.source_format, compactions=[point])


def forwarded_as_sent(session: Session) -> bool:
    """True while the session's context is the one a client's compaction left: its
    requests go upstream as the client sent them (module doc)."""
    state = session.proxy_state if isinstance(session.proxy_state, Mapping) else {}
    return state.get(_WINDOW) == session.context_revision
