"""Rows as API dicts (the shapes of sessions_app.api.schemas)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sessions_app.services.sessions.policies import default_profile
from sessions_app.services.sessions.threshold import shown_standing

from ..compaction_tree import CompactionTree
from ..models import Compaction, CompactionJob, CompactionProfile, Session
from ..selectors.compactions import compaction_links
from ..selectors.profiles import profiles_by_id

__all__ = ["ProfileCache", "compaction_dict", "job_dict", "marker_tree", "session_dict"]


class ProfileCache:
    """Profiles read once per request, so a page of sessions costs one query."""

    def __init__(self) -> None:
        self.by_id = profiles_by_id()
        self.default = default_profile()

    def for_session(self, session: Session) -> CompactionProfile:
        if session.profile_id is not None and session.profile_id in self.by_id:
            return self.by_id[session.profile_id]
        return self.default


def session_dict(session: Session, profiles: ProfileCache | None = None) -> dict[str, Any]:
    """A session with its token stats, limit and threshold."""
    profile = (profiles or ProfileCache()).for_session(session)
    standing = shown_standing(session, profile)  # the engine's limit and threshold
    limit = standing.context_limit
    return {
        "id": session.pk,
        "title": session.title,
        "source_format": session.source_format,
        "model": session.model,
        "external_id": session.external_id,
        "parent": session.parent_id,
        "profile": profile.name,
        "context_limit": limit,
        "threshold": standing.threshold,
        "version": session.version,
        "message_count": session.message_count,
        "history_tokens": session.history_tokens,
        "context_tokens": session.context_tokens,
        "context_entry_count": session.context_entry_count,
        "compaction_count": session.compaction_count,
        "usage": round(session.context_tokens / limit, 6) if limit else None,
        "last_usage": session.last_usage,
        "metadata": session.metadata,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
    }


def children_map(compactions: Iterable[Compaction]) -> dict[int, list[int]]:
    """Compaction pk -> numbers of the compactions it absorbed."""
    items = list(compactions)
    number_of = {c.pk: c.number for c in items}
    children: dict[int, list[int]] = defaultdict(list)
    for c in items:
        if c.parent_id is not None:
            children[c.parent_id].append(number_of.get(c.pk, c.number))
    return children


def compaction_dict(
    compaction: Compaction,
    *,
    parent_number: int | None = None,
    children: list[int] | None = None,
) -> dict[str, Any]:
    """A compaction point with the stat names (docs/behaviour.md#stats)."""
    return {
        "number": compaction.number,
        "parent": parent_number,
        "status": compaction.status,
        "trigger": compaction.trigger,
        "created_at": compaction.created_at,
        "strategy": compaction.strategy,
        "summarizer": compaction.summarizer,
        "model": compaction.model,
        "instructions": compaction.instructions,
        "first_seq": compaction.first_seq,
        "last_seq": compaction.last_seq,
        "summary": compaction.summary,
        "original_token_count": compaction.tokens_before,
        "compacted_token_count": compaction.tokens_after,
        "compaction_ratio": compaction.ratio,
        "compacted_message_count": compaction.compacted_message_count,
        "retained_message_count": compaction.retained_message_count,
        "recall": compaction.recall,
        "messages_before": compaction.messages_before,
        "messages_after": compaction.messages_after,
        "duration_ms": compaction.duration_ms,
        "failure_reason": compaction.failure_reason or None,
        "children": sorted(children or []),
        "context_limit": compaction.context_limit,
        "threshold_tokens": compaction.threshold_tokens,
        "hard_limit": compaction.hard_limit,
    }


def compaction_dicts(compactions: list[Compaction]) -> list[dict[str, Any]]:
    """Several compactions of one session, with parent numbers and children, two queries."""
    if not compactions:
        return []
    session_id = compactions[0].session_id
    related = compaction_links(session_id)
    number_of = {c.pk: c.number for c in related}
    children = children_map(related)
    return [
        compaction_dict(
            c,
            parent_number=number_of.get(c.parent_id) if c.parent_id else None,
            children=children.get(c.pk, []),
        )
        for c in compactions
    ]


def marker_tree(compactions: Iterable[Compaction]) -> list[dict[str, Any]]:
    """Succeeded compactions as nested markers, each with its range and its children: the
    one tree of sessions_app/compaction_tree.py, which the history tab draws too."""
    tree = CompactionTree(compactions)

    def build(c: Compaction) -> dict[str, Any]:
        return {
            "number": c.number,
            "trigger": c.trigger,
            "status": c.status,
            "created_at": c.created_at,
            "first_seq": c.first_seq,
            "last_seq": c.last_seq,
            "summary": c.summary,
            "summarizer": c.summarizer,
            "original_token_count": c.tokens_before,
            "compacted_token_count": c.tokens_after,
            "compacted_message_count": c.compacted_message_count,
            "children": [build(child) for child in tree.children(c)],
        }

    return [build(c) for c in tree.roots]


def job_dict(job: CompactionJob) -> dict[str, Any]:
    """A background job: status, phase, events, error and the compaction it made."""
    return {
        "id": job.pk,
        "session": job.session_id,
        "status": job.status,
        "phase": job.phase,
        "events": job.events,
        "error": job.error,
        "attempts": job.attempts,
        "params": job.params,
        "compaction": job.compaction.number if job.compaction is not None else None,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "heartbeat_at": job.heartbeat_at,
    }
