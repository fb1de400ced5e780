"""sessions_app.services.offloading: large tool results to files, context entries only."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.storage import default_storage

from compaction.offload import offload_reference
from sessions_app.models import ContextEntry, Message
from sessions_app.services.context import runtime_messages
from sessions_app.services.offloading import offload_session
from tests.support.histories import assistant, exchange, user

pytestmark = pytest.mark.django_db

BIG = "line of tool output\n" * 50


def test_large_results_go_to_files_and_the_history_keeps_them(make_session: Any) -> None:
    session = make_session(
        messages=[
            user("go"),
            *exchange("t1", result=BIG),
            *exchange("t2", result="short"),
            assistant("ok"),
        ]
    )
    before = session.context_tokens
    result = offload_session(session)
    assert result.offloaded_count == 1
    assert result.entries_changed == 1
    assert result.freed_chars == len(BIG)
    assert result.files == ("tool-result-t1.md",), "names, not server paths"
    name = f"offload/{session.pk}/tool-result-t1.md"
    with default_storage.open(name) as handle:
        assert handle.read().decode() == BIG
    block = runtime_messages(session)[2]["content"][0]
    assert block["content"] == offload_reference("tool-result-t1.md")
    assert result.tokens_after < before == result.tokens_before
    assert session.context_tokens == result.tokens_after
    # The full history is untouched.
    assert Message.objects.get(session=session, seq=2).content[0]["content"] == BIG
    assert ContextEntry.objects.filter(session=session, content__isnull=False).count() == 1


def test_min_chars_override(make_session: Any) -> None:
    session = make_session(messages=[user("go"), *exchange("t1", result="x" * 50), assistant("ok")])
    assert offload_session(session).offloaded_count == 0
    assert offload_session(session, min_chars=10).offloaded_count == 1


def test_offloading_twice_changes_nothing_more(make_session: Any) -> None:
    session = make_session(messages=[user("go"), *exchange("t1", result=BIG), assistant("ok")])
    offload_session(session)
    version = session.version
    again = offload_session(session)
    assert again.offloaded_count == 0
    assert session.version == version
