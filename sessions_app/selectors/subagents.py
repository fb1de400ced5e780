"""Subagent sessions: the sessions an agent's `Agent`/`Task` tool calls started, and back.

An importer stores a subagent transcript as its own session with `parent` (the session that
started it) and `parent_tool_use_id` (the id of the tool call that did).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import QuerySet

from sessions_app.models import Session

__all__ = ["SubagentLink", "subagent_links", "subagents_of", "top_level"]


@dataclass(frozen=True)
class SubagentLink:
    """A link to a subagent session: its id, title and the tool call that started it."""

    session_id: uuid.UUID
    title: str
    tool_use_id: str


def subagent_links(session: Session) -> dict[str, SubagentLink]:
    """The subagents of `session` that know their tool call, by that call's id."""
    rows = (
        Session.objects.filter(parent=session)
        .exclude(parent_tool_use_id="")
        .values_list("pk", "title", "parent_tool_use_id")
    )
    return {tool: SubagentLink(pk, title, tool) for pk, title, tool in rows}


def subagents_of(parents: Iterable[Session]) -> dict[uuid.UUID, list[Session]]:
    """The subagent sessions of each of `parents` (one query), oldest first."""
    ids = [parent.pk for parent in parents]
    grouped: dict[uuid.UUID, list[Session]] = {pk: [] for pk in ids}
    if not ids:
        return grouped
    rows = Session.objects.filter(parent_id__in=ids).select_related("profile")
    for child in rows.order_by("created_at", "pk"):
        if child.parent_id is not None:
            grouped[child.parent_id].append(child)
    return grouped


def top_level(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Those of `sessions` that are no one's subagent."""
    return sessions.filter(parent__isnull=True)
