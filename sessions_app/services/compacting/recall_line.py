"""The recall line: a summary ctxweb writes says which messages it stands for, and where to
read them (issue 28, README "Let the agent look back").

    Earlier messages 12-340 are compacted as #3 of ctxweb session <id>; read them with the
    read_messages tool.

A model connected to ctxweb's MCP server can then go back to exactly those originals
(`read_messages(session, compaction=3)`). The session's profile decides (`recall_line`, on by
default) while the MCP server is enabled (CTXWEB_MCP_ENABLED). Added by the write-back
(services/compacting/writeback.commit_context) inside its transaction, once the
compaction's number and range are known; the summary entry's tokens are counted again and
the compaction's `tokens_after` grows by the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Max, Min

from compaction import message_token_counts
from sessions_app.models import Compaction, ContextEntry, Session
from sessions_app.services.sessions.policies import profile_for

__all__ = ["add_recall_line", "predicted_recall_tokens", "recall_line", "recall_wanted"]


def recall_line(session_id: Any, number: int, first: int, last: int) -> str:
    """The line naming compaction `number`'s range of `session_id`."""
    return (
        f"Earlier messages {first}-{last} are compacted as #{number} of ctxweb session "
        f"{session_id}; read them with the read_messages tool."
    )


def recall_wanted(session: Session) -> bool:
    """True when the session's summaries carry the recall line."""
    if not getattr(settings, "CTXWEB_MCP_ENABLED", True):
        return False
    return bool(profile_for(session).recall_line)


def add_recall_line(session: Session, compaction: Compaction, encoding: str | None) -> None:
    """End the summary entries `compaction` added with its recall line (when the profile
    wants it), their token counts and the compaction's `tokens_after` (and so its ratio)
    counted again. Called in the write-back's transaction, before the session's counters are
    saved."""
    if compaction.first_seq is None or compaction.last_seq is None:
        return
    if not recall_wanted(session):
        return
    line = recall_line(session.pk, compaction.number, compaction.first_seq, compaction.last_seq)
    summaries = ContextEntry.objects.filter(
        session=session, compaction=compaction, kind=ContextEntry.Kind.SUMMARY
    )
    grown = 0
    for entry in summaries:
        entry.content = _with_line(entry.content, line)
        message = {**entry.extra, "role": entry.role, "content": entry.content}
        [tokens] = message_token_counts([message], encoding)
        grown += tokens - entry.token_count
        entry.token_count = tokens
        entry.save(update_fields=["content", "token_count"])
    if grown:
        compaction.tokens_after += grown
        before = compaction.tokens_before
        compaction.ratio = compaction.tokens_after / before if before else compaction.ratio
        compaction.save(update_fields=["tokens_after", "ratio"])


def predicted_recall_tokens(
    session: Session,
    summaries: Sequence[Mapping[str, Any]],
    covered: Sequence[int],
    encoding: str | None,
) -> int:
    """The tokens the recall line will add to `summaries` when a dry run's result is applied
    (`covered`: the entry ids of the middle), so a preview predicts what applying stores."""
    if not summaries or not recall_wanted(session):
        return 0
    span = ContextEntry.objects.filter(session=session, pk__in=covered).aggregate(
        first=Min("message__seq"), last=Max("message__seq")
    )
    top = Compaction.objects.filter(session=session).aggregate(top=Max("number"))["top"]
    line = recall_line(session.pk, int(top or 0) + 1, span["first"] or 0, span["last"] or 0)
    grown = 0
    for message in summaries:
        with_line = {**message, "content": _with_line(message.get("content"), line)}
        before, after = message_token_counts([message, with_line], encoding)
        grown += after - before
    return grown


def _with_line(content: Any, line: str) -> Any:
    """The summary's content with `line` after it (text, or a last text block)."""
    if isinstance(content, list):
        return [*content, {"type": "text", "text": line}]
    if isinstance(content, str):
        return f"{content.rstrip()}\n\n{line}"
    return content
