"""Search everything (issue 29 item 6): full-text hits over the owner's full histories,
grouped by session for the list page, each linking to its message in the History tab.

The hits come from `selectors.search.search_history` (newest first); a session's group
stands where its newest hit does. A hit's link opens the session at `?at=<message index>`:
static/js/at.js asks which markers hold the message (views/search.message_path), opens
them and scrolls to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from django.urls import reverse
from django.utils.http import urlencode

from sessions_app.selectors.search import SearchHit

__all__ = ["HIT_LIMIT", "HitGroup", "HitView", "SnippetPart", "group_hits", "hit_url"]

#: Hits asked for one search (the selector's newest first); a group lists every hit it got.
HIT_LIMIT: Final = 60


@dataclass(frozen=True, slots=True)
class SnippetPart:
    """A run of a snippet's text, `match` when it is one of the query's words."""

    text: str
    match: bool


@dataclass(frozen=True, slots=True)
class HitView:
    """One matching message as the list draws it."""

    message_index: int
    role: str
    created_at: datetime | None
    compaction: int | None
    parts: tuple[SnippetPart, ...]
    url: str


@dataclass(frozen=True, slots=True)
class HitGroup:
    """A session's hits, newest first."""

    session_id: str
    title: str
    hits: tuple[HitView, ...]

    @property
    def url(self) -> str:
        """The session's page."""
        return reverse("ui:session", args=[self.session_id])


def snippet_parts(snippet: str, highlights: Sequence[tuple[int, int]]) -> tuple[SnippetPart, ...]:
    """`snippet` cut at its highlights (offsets outside it or overlapping are ignored)."""
    parts: list[SnippetPart] = []
    done = 0
    for start, end in sorted(highlights):
        if start < done or end > len(snippet) or start >= end:
            continue
        if start > done:
            parts.append(SnippetPart(snippet[done:start], False))
        parts.append(SnippetPart(snippet[start:end], True))
        done = end
    if done < len(snippet):
        parts.append(SnippetPart(snippet[done:], False))
    return tuple(parts)


def hit_url(hit: SearchHit) -> str:
    """The session's History tab at the hit's message (the page opens the markers above it)."""
    query: dict[str, str | int] = {"tab": "history", "at": hit.message_index}
    return f"{reverse('ui:session', args=[hit.session_id])}?{urlencode(query)}"


def group_hits(hits: Sequence[SearchHit]) -> list[HitGroup]:
    """`hits` grouped by session, the groups in the order of their newest hit."""
    order: dict[str, list[SearchHit]] = {}
    for hit in hits:
        order.setdefault(hit.session_id, []).append(hit)
    return [
        HitGroup(
            session_id=session_id,
            title=found[0].session_title,
            hits=tuple(
                HitView(
                    message_index=hit.message_index,
                    role=hit.role,
                    created_at=hit.created_at,
                    compaction=hit.compaction,
                    parts=snippet_parts(hit.snippet, hit.highlights),
                    url=hit_url(hit),
                )
                for hit in found
            ),
        )
        for session_id, found in order.items()
    ]
