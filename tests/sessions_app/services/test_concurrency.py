"""Compactions racing appends and each other (live threads, committed transactions)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from compaction import SummaryRequest, is_summary_message
from sessions_app.models import Compaction, Session
from sessions_app.services.compacting.session_compaction import CompactionOutcome, compact_session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.errors import Conflict
from sessions_app.services.sessions.lifecycle import append_messages
from tests.support.histories import assistant, user

pytestmark = pytest.mark.django_db(transaction=True)


class BlockingSummarizer:
    """Signals `started`, then waits for `release` before answering."""

    name = "blocking"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def summarize(self, request: SummaryRequest) -> str:
        self.started.set()
        assert self.release.wait(10), "test never released the summarizer"
        return "Goals and key decisions:\n- blocked summary"


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = target()
        except BaseException as error:
            box["error"] = error
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def test_appends_during_a_compaction_are_kept_after_the_summary(session: Session) -> None:
    blocker = BlockingSummarizer()
    thread, box = in_thread(lambda: compact_session(session, summarizer=blocker))
    try:
        assert blocker.started.wait(10)
        # The compaction is running: an append neither waits for it nor is lost.
        new = [user("a question asked meanwhile"), assistant("an answer given meanwhile")]
        rows = append_messages(Session.objects.get(pk=session.pk), new)
        assert len(rows) == 2
    finally:
        # Never leave the worker thread blocked holding its database connection.
        blocker.release.set()
        thread.join(10)
    assert not thread.is_alive(), "the compaction never finished"
    assert "error" not in box, box.get("error")
    outcome: CompactionOutcome = box["value"]
    assert outcome.compacted
    messages = runtime_messages(session)
    assert [m["content"] for m in messages[-2:]] == [new[0]["content"], new[1]["content"]]
    summary_at = next(i for i, m in enumerate(messages) if is_summary_message(m))
    assert summary_at < len(messages) - 2
    fresh = Session.objects.get(pk=session.pk)
    assert fresh.context_entry_count == len(messages)
    assert fresh.message_count == 12 * 6 + 1 + 2


def test_two_concurrent_compactions_one_wins_the_other_conflicts(session: Session) -> None:
    first, second = BlockingSummarizer(), BlockingSummarizer()
    threads: list[threading.Thread] = []
    try:
        thread_a, box_a = in_thread(lambda: compact_session(session, summarizer=first))
        threads.append(thread_a)
        assert first.started.wait(10)
        thread_b, box_b = in_thread(lambda: compact_session(session, summarizer=second))
        threads.append(thread_b)
        assert second.started.wait(10), box_b.get("error")
        # Both worked on the same entries; the first to commit wins.
        first.release.set()
        thread_a.join(10)
        second.release.set()
        thread_b.join(10)
    finally:
        # Never leave a worker thread blocked holding its database connection.
        first.release.set()
        second.release.set()
        for thread in threads:
            thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "a compaction never finished"
    assert "error" not in box_a, box_a.get("error")
    assert isinstance(box_b.get("error"), Conflict)
    assert Compaction.objects.filter(session=session, status="succeeded").count() == 1
    summaries = [m for m in runtime_messages(session) if is_summary_message(m)]
    assert len(summaries) == 1
