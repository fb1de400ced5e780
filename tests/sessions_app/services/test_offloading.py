"""sessions_app.services.compacting.offloading: large tool results to files, context entries
only."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.storage import default_storage

from compaction.offload import offload_reference
from sessions_app.models import Compaction, ContextEntry, Message
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.errors import Conflict
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


def test_an_offload_is_recorded_in_the_compaction_log_with_its_files(make_session: Any) -> None:
    session = make_session(
        messages=[user("go"), *exchange("t1", result=BIG), *exchange("t2", result=BIG * 2)]
    )
    before = session.context_tokens
    result = offload_session(session)
    assert result.compaction is not None
    record = Compaction.objects.get(session=session, number=result.compaction)
    assert record.strategy == Compaction.Kind.OFFLOAD
    assert record.trigger == Compaction.Trigger.MANUAL
    assert record.status == Compaction.Status.SUCCEEDED
    files = record.details["offload"]["files"]
    assert files == [
        {"name": "tool-result-t1.md", "bytes": len(BIG)},
        {"name": "tool-result-t2.md", "bytes": len(BIG * 2)},
    ]
    assert record.tokens_before == before
    assert record.tokens_after == session.context_tokens < before
    assert record.threshold_tokens is not None
    session.refresh_from_db()
    assert session.compaction_count == 0, "an offload is not a compaction point"


def test_undoing_an_offload_restores_the_results_exactly(make_session: Any) -> None:
    session = make_session(messages=[user("go"), *exchange("t1", result=BIG), assistant("ok")])
    original = runtime_messages(session)
    tokens = session.context_tokens
    result = offload_session(session)
    assert result.compaction is not None
    assert runtime_messages(session) != original
    revert_compaction(session, result.compaction)
    assert runtime_messages(session) == original
    assert session.context_tokens == tokens
    assert Compaction.objects.get(session=session).status == Compaction.Status.REVERTED
    # Undone once: a second undo is refused, naming why.
    with pytest.raises(Conflict, match="reverted"):
        revert_compaction(session, result.compaction)


def test_an_offload_that_cannot_commit_leaves_no_file_behind(
    make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessions_app.services.compacting import offloading

    session = make_session(messages=[user("go"), *exchange("t1", result=BIG), assistant("ok")])
    original = runtime_messages(session)

    def conflict(*args: Any, **kwargs: Any) -> Any:
        raise Conflict("another change committed first")

    monkeypatch.setattr(offloading, "commit_context", conflict)
    with pytest.raises(Conflict):
        offload_session(session)
    assert not default_storage.exists(f"offload/{session.pk}/tool-result-t1.md")
    assert runtime_messages(session) == original
    assert not Compaction.objects.filter(session=session).exists()
