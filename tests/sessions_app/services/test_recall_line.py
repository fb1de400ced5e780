"""The recall line (issue 28): a summary ctxweb writes names its range and session in one
line, counted in its tokens; the profile decides, while the MCP server is enabled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db.models import Sum

from compaction import message_token_counts
from sessions_app.models import Compaction, ContextEntry, Session
from sessions_app.services.compacting.recall_line import recall_line
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import append_messages

pytestmark = pytest.mark.django_db


def _summary_entry(session: Session) -> ContextEntry:
    return ContextEntry.objects.get(session=session, kind=ContextEntry.Kind.SUMMARY)


def test_the_summary_ends_with_its_range_and_session(
    make_session: Callable[..., Session], conversation: Any
) -> None:
    session = make_session(messages=conversation(8))
    compaction = compact_session(session, summary="The user fixed the parser.", force=True)
    row = compaction.compaction
    assert row is not None
    entry = _summary_entry(session)
    line = (
        f"Earlier messages {row.first_seq}-{row.last_seq} are compacted as #1 of ctxweb "
        f"session {session.pk}; read them with the read_messages tool."
    )
    assert line == recall_line(session.pk, 1, row.first_seq or 0, row.last_seq or 0)
    text = entry.content if isinstance(entry.content, str) else str(entry.content)
    assert text.rstrip().endswith(line)
    counted = {**entry.extra, "role": entry.role, "content": entry.content}
    assert entry.token_count == message_token_counts([counted])[0]
    session.refresh_from_db()
    total = ContextEntry.objects.filter(session=session).aggregate(t=Sum("token_count"))["t"]
    assert session.context_tokens == total
    without_line = message_token_counts([{**counted, "content": text.replace(line, "")}])[0]
    row.refresh_from_db()
    assert row.tokens_after > 0
    assert entry.token_count > without_line


def test_a_second_compaction_names_its_own_wider_range(
    make_session: Callable[..., Session], conversation: Any
) -> None:
    session = make_session(messages=conversation(8))
    compact_session(session, summary="first", force=True)
    append_messages(session, conversation(8)[1:])
    second = compact_session(session, summary="second", force=True).compaction
    assert second is not None
    assert second.number == 2
    entry = ContextEntry.objects.get(session=session, kind=ContextEntry.Kind.SUMMARY)
    assert f"compacted as #2 of ctxweb session {session.pk}" in str(entry.content)
    assert f"Earlier messages {second.first_seq}-{second.last_seq} " in str(entry.content)


def test_off_by_profile_or_without_the_mcp_server(
    make_session: Callable[..., Session], conversation: Any, make_profile: Any, settings: Any
) -> None:
    quiet = make_profile("quiet", recall_line=False)
    session = make_session(messages=conversation(8), profile=quiet)
    compact_session(session, summary="no line here", force=True)
    assert "read_messages" not in str(_summary_entry(session).content)
    settings.CTXWEB_MCP_ENABLED = False
    other = make_session(messages=conversation(8))
    compact_session(other, summary="no line either", force=True)
    assert "read_messages" not in str(_summary_entry(other).content)
    assert Compaction.objects.filter(status="succeeded").count() == 2
