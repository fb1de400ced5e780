"""Compaction ahead of time through the proxy: no request waits for the summary model below
the hard limit (issue 26 item 1, docs/behaviour.md#prepared-compaction).

The summary model is a fake Anthropic API that answers only when the test opens its gate
(a model as slow as the test wants, with no clock in the assertions); the conversation goes
through ctxweb under uvicorn with the real Anthropic SDK, the prepare job runs on a worker
thread as `manage.py db_worker` would run it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from django.db import connection

from sessions_app.models import (
    Compaction,
    CompactionJob,
    CompactionProfile,
    PreparedCompaction,
    Session,
)
from sessions_app.services.background.jobs import PREPARE, run_job
from sessions_app.services.sessions.threshold import session_standing
from tests.sessions_app.proxy.conftest import (  # noqa: F401 (fixtures)
    claude,
    ctx_key,
    database_not_paused,
    proxy_server,
    upstream_anthropic,
)
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply
from tests.support.fake_server import ScriptedReply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)


class GatedSummaries(FakeAnthropic):
    """A summary model that answers once `gate` is set; `arrived` is set by its first request."""

    def __init__(self) -> None:
        super().__init__(Reply.text("Goals and key decisions:\n- summarized in the background"))
        self.gate = threading.Event()
        self.arrived = threading.Event()

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        self.arrived.set()
        self.gate.wait(timeout=60)
        return super()._take(request)


@pytest.fixture
def summaries(settings: Any) -> Iterator[GatedSummaries]:
    with GatedSummaries() as server:
        settings.ANTHROPIC_API_KEY = "sk-ant-summaries"
        settings.ANTHROPIC_BASE_URL = server.base_url
        yield server
        server.gate.set()


@pytest.fixture
def preparing_profile(transactional_db: Any, summaries: GatedSummaries) -> CompactionProfile:
    """The default profile: 3000 tokens, prepared from 40%, compacting at 60%."""
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(
        name="prepares",
        is_default=True,
        summarizer="anthropic",
        summary_model="summary-model",
        context_limit=3000,
        prepare_at=0.4,
        trigger_ratio=0.6,
        keep_recent_messages=2,
        tail_retention_ratio=0.1,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )


def _work(job_id: str) -> None:
    """The worker's run of one job, on a thread of its own (its connection closed after)."""
    try:
        run_job(job_id)
    finally:
        connection.close()


def _turn(turn: int) -> str:
    return f"turn {turn}: " + " ".join(f"w{turn}x{i}" for i in range(40))


def test_the_request_crossing_the_threshold_does_not_wait_for_the_summary_model(
    claude: anthropic.Anthropic,  # noqa: F811
    upstream_anthropic: StreamingAnthropic,  # noqa: F811
    summaries: GatedSummaries,
    preparing_profile: CompactionProfile,
) -> None:
    history: list[Any] = []

    def say(turn: int) -> None:
        history.append({"role": "user", "content": _turn(turn)})
        reply: Any = claude.messages.create(model="m", max_tokens=20, messages=history)
        history.append({"role": "assistant", "content": reply.content[0].text})

    turn = 0
    while not CompactionJob.objects.exists():  # up to the soft threshold
        say(turn)
        turn += 1
    job = CompactionJob.objects.get()
    assert job.params["kind"] == PREPARE
    worker = threading.Thread(target=_work, args=(str(job.pk),), daemon=True)
    worker.start()
    assert summaries.arrived.wait(timeout=30)  # the summary model is answering now
    session = Session.objects.get()
    crossed = 0
    while crossed < 2:  # requests at the threshold, answered while the model still writes
        say(turn)
        turn += 1
        session.refresh_from_db()
        standing = session_standing(session, preparing_profile)
        assert not standing.over_hard_limit
        crossed += int(standing.over_threshold)
    assert not summaries.gate.is_set()
    assert not Compaction.objects.filter(session=session).exists()  # forwarded uncompacted
    summaries.gate.set()
    worker.join(timeout=60)
    assert PreparedCompaction.objects.filter(session=session).exists()
    asked = len(summaries.requests)
    say(turn)  # at the threshold with one ready: applied, no summary request
    assert len(summaries.requests) == asked
    row = Compaction.objects.get(session=session)
    assert row.prepared_at is not None
    assert row.prepared_at < row.created_at
    assert row.trigger == "auto"
    last = upstream_anthropic.requests[-1].body["messages"]
    assert len(last) < len(history) - 1
    assert last[-1] == history[-2]  # the newest message, as the client sent it
    session.refresh_from_db()
    assert session.message_count == len(history)
