"""Faults in background compaction jobs: the job says what happened, nothing is half-written.

Each test queues a job with `enqueue_compaction` and runs it as the worker would
(`run_job`), with the summary model being a local fake Messages API server, the archive
storage failing, or the database failing at commit. After every fault: the full history is
intact, the runtime context is either exactly as before or validly truncated, the cached
totals agree with the rows, and the job's final state names the fault. A fault that leaves
the session unchanged (archive, database, a concurrent compaction) queues the job once more;
a summarizer fault does not (the summarizer retried it within the run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection

from compaction import SummaryRequest
from sessions_app.models import (
    Compaction,
    CompactionJob,
    CompactionProfile,
    ContextEntry,
    Session,
)
from sessions_app.services.background.jobs import MAX_ATTEMPTS, enqueue_compaction, run_job
from sessions_app.services.compacting import writeback
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.histories import synthetic_history

from .integrity import context_fingerprint, session_problems

MESSAGES = 60
RETRIES = 1  # so a retryable fault is tried twice


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def blob_dir(tmp_path: Path) -> Path:
    return tmp_path / "blobs"


@pytest.fixture(autouse=True)
def _configured(settings: Any, fake: FakeAnthropic, blob_dir: Path) -> None:
    """Summaries from the fake server; archives in this test's folder; no heartbeat writes."""
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.ANTHROPIC_BASE_URL = fake.base_url
    settings.CTXWEB_SUMMARY_MODEL = "claude-fake"
    settings.CTXWEB_SUMMARIZER_CLASS = ""
    settings.CTXWEB_JOB_HEARTBEAT_SECONDS = 60
    settings.STORAGES = _storages(settings, "django.core.files.storage.FileSystemStorage", blob_dir)


def _storages(settings: Any, backend: str, location: Path) -> dict[str, Any]:
    return {
        **settings.STORAGES,
        "default": {"BACKEND": backend, "OPTIONS": {"location": str(location)}},
    }


def _profile(name: str, steps: list[str]) -> CompactionProfile:
    return CompactionProfile.objects.create(
        name=name,
        summarizer=CompactionProfile.SummarizerKind.ANTHROPIC,
        summary_model="claude-fake",
        steps=steps,
        max_retries=RETRIES,
        retry_backoff_seconds=0,
        summary_timeout_seconds=0.5,
    )


@pytest.fixture
def summary_only(db: Any) -> CompactionProfile:
    """Summary or nothing: a summarizer fault must leave the context unchanged."""
    return _profile("faults-summary", ["summary"])


@pytest.fixture
def with_fallback(db: Any) -> CompactionProfile:
    """Summary, else smart truncation, else hard truncation (the balanced chain)."""
    return _profile("faults-fallback", ["summary", "smart_truncate", "hard_truncate"])


@pytest.fixture
def session(db: Any) -> Session:
    owner = get_user_model().objects.create_user(username="faults")
    history = synthetic_history(MESSAGES, words_per_message=80)
    return create_session(owner, title="faults", messages=history, context_limit=2000)


def _run(session: Session, profile: CompactionProfile) -> CompactionJob:
    job = enqueue_compaction(session, params={"trigger": "manual", "profile": profile.name})
    return _run_again(job)


def _run_again(job: CompactionJob) -> CompactionJob:
    """Run the job's current task as the worker would."""
    run_job(str(job.pk))
    job.refresh_from_db()
    return job


def _phases(job: CompactionJob) -> list[str]:
    return [event["phase"] for event in job.events]


def _assert_requeued(job: CompactionJob, reason: str) -> None:
    """The first attempt failed with `reason` and the job waits for its second run."""
    assert job.status == CompactionJob.Status.QUEUED, job.error
    assert job.attempts == 1
    assert job.finished_at is None
    retry = job.events[-1]
    assert (retry["phase"], retry["reason"], retry["attempt"]) == ("retry", reason, 1)
    assert reason in job.error
    assert "attempt 2 of 2 was queued" in job.error


def _assert_sound(session: Session) -> None:
    expected = len(synthetic_history(MESSAGES, words_per_message=80))
    assert session_problems(session, expected_messages=expected) == []


SUMMARIZER_FAULTS = [
    pytest.param(Reply.rate_limited(), "api_error", True, id="429"),
    pytest.param(Reply.overloaded(), "api_error", True, id="529"),
    pytest.param(Reply.server_error(), "api_error", True, id="500"),
    pytest.param(Reply.hang(3.0), "timeout", True, id="timeout"),
    pytest.param(Reply.empty_text(), "empty_summary", None, id="empty"),
    pytest.param(Reply.content_null(), "content_none", None, id="content-null"),
    pytest.param(Reply.thinking_only(), "thinking_only_no_content", None, id="thinking-only"),
    pytest.param(Reply.max_tokens_no_text(), "max_tokens_no_content", None, id="max-tokens"),
]


@pytest.mark.parametrize(("reply", "reason", "retried"), SUMMARIZER_FAULTS)
def test_a_summarizer_fault_fails_the_job_with_its_reason_and_changes_nothing(
    session: Session,
    summary_only: CompactionProfile,
    fake: FakeAnthropic,
    blob_dir: Path,
    reply: Reply,
    reason: str,
    retried: bool | None,
) -> None:
    fake.default = reply
    before = context_fingerprint(session)

    job = _run(session, summary_only)

    assert job.status == CompactionJob.Status.FAILED
    assert reason in job.error
    assert job.finished_at is not None
    assert job.events[-1]["phase"] == "failed"
    assert job.attempts == 1, "retried within the run, not queued again"
    assert "retry" not in _phases(job)
    failed = Compaction.objects.get(session=session)
    assert failed.status == Compaction.Status.FAILED
    assert failed.failure_reason == reason
    if retried:
        assert len(fake.requests) == RETRIES + 1, "a transient fault is retried"
    else:
        assert 1 <= len(fake.requests) <= RETRIES + 1
    assert context_fingerprint(session) == before
    assert not list(blob_dir.rglob("*.json")), "no archive of a compaction that did not happen"
    _assert_sound(session)


@pytest.mark.parametrize(
    "transient", [Reply.rate_limited(), Reply.overloaded()], ids=["429", "529"]
)
def test_a_transient_fault_is_retried_and_the_job_succeeds(
    session: Session, summary_only: CompactionProfile, fake: FakeAnthropic, transient: Reply
) -> None:
    fake.script(transient, Reply.text("Goals: keep the parser working. Files: src/app.py."))

    job = _run(session, summary_only)

    assert job.status == CompactionJob.Status.SUCCEEDED, job.error
    assert len(fake.requests) >= 2, "the failed attempt was retried"
    compaction = Compaction.objects.get(session=session)
    assert compaction.status == Compaction.Status.SUCCEEDED
    assert "keep the parser working" in compaction.summary
    _assert_sound(session)


@pytest.mark.parametrize(
    "reply", [Reply.overloaded(), Reply.hang(3.0), Reply.thinking_only()], ids=str
)
def test_with_a_fallback_a_summarizer_fault_truncates_validly(
    session: Session, with_fallback: CompactionProfile, fake: FakeAnthropic, reply: Reply
) -> None:
    fake.default = reply
    before = session.context_tokens

    job = _run(session, with_fallback)

    session.refresh_from_db()
    assert job.status == CompactionJob.Status.SUCCEEDED, job.error
    compaction = Compaction.objects.get(session=session, status=Compaction.Status.SUCCEEDED)
    assert "truncate" in compaction.strategy
    assert compaction.summarizer == ""
    assert session.context_tokens < before
    _assert_sound(session)


@pytest.mark.parametrize(
    "backend",
    [
        "tests.deploy.faulty_storage.PermissionDeniedStorage",
        "tests.deploy.faulty_storage.DiskFullStorage",
    ],
    ids=["permission-denied", "disk-full"],
)
def test_an_archive_storage_failure_is_retried_once_then_fails_the_job_and_changes_nothing(
    settings: Any,
    session: Session,
    summary_only: CompactionProfile,
    blob_dir: Path,
    backend: str,
) -> None:
    settings.STORAGES = _storages(settings, backend, blob_dir)
    before = context_fingerprint(session)

    job = _run(session, summary_only)

    _assert_requeued(job, "archive_error")
    assert context_fingerprint(session) == before

    job = _run_again(job)

    assert job.status == CompactionJob.Status.FAILED
    assert job.attempts == MAX_ATTEMPTS
    assert "archive_error" in job.error
    assert "not retried again" in job.error
    assert _phases(job).count("retry") == 1
    failed = Compaction.objects.filter(session=session)
    assert [c.failure_reason for c in failed] == ["archive_error", "archive_error"]
    assert context_fingerprint(session) == before
    assert not blob_dir.exists() or not any(blob_dir.rglob("*.json"))
    _assert_sound(session)


def test_an_archive_storage_that_recovers_lets_the_retry_succeed(
    settings: Any, session: Session, summary_only: CompactionProfile, blob_dir: Path
) -> None:
    settings.STORAGES = _storages(settings, "tests.deploy.faulty_storage.DiskFullStorage", blob_dir)
    before = session.context_tokens
    job = _run(session, summary_only)
    _assert_requeued(job, "archive_error")

    # Space was freed before the retry ran.
    settings.STORAGES = _storages(settings, "django.core.files.storage.FileSystemStorage", blob_dir)
    job = _run_again(job)

    session.refresh_from_db()
    assert job.status == CompactionJob.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    assert job.compaction is not None
    assert job.compaction.status == Compaction.Status.SUCCEEDED
    assert session.context_tokens < before
    assert any(blob_dir.rglob("*.json")), "the retry archived the originals"
    _assert_sound(session)


def test_a_database_error_inside_the_commit_rolls_back_removes_the_archive_and_is_retried(
    session: Session, summary_only: CompactionProfile, blob_dir: Path, monkeypatch: Any
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise DatabaseError("simulated: connection lost during commit")

    monkeypatch.setattr(writeback, "save_entry_counters", broken)
    before = context_fingerprint(session)

    job = _run(session, summary_only)

    _assert_requeued(job, "database_error")
    assert Compaction.objects.get(session=session).failure_reason == "database_error"
    assert context_fingerprint(session) == before
    assert not any(blob_dir.rglob("*.json")), "the archive of the rolled-back commit is removed"

    monkeypatch.undo()  # the database is back
    job = _run_again(job)

    assert job.status == CompactionJob.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    assert [c.status for c in Compaction.objects.filter(session=session)] == [
        Compaction.Status.FAILED,
        Compaction.Status.SUCCEEDED,
    ]
    _assert_sound(session)


class RacingSummarizer:
    """In each of the first `races` runs, another compaction of the session commits first."""

    name = "racing"
    races = 0
    session: Session | None = None

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        self.raced = False  # one instance per run; the engine may ask it twice (recall)

    def summarize(self, request: SummaryRequest) -> str:
        cls = type(self)
        if cls.races > 0 and cls.session is not None and not self.raced:
            cls.races -= 1
            self.raced = True
            won = compact_session(cls.session, summary="Goals: a concurrent compaction won.")
            assert won.compacted
        return "Goals: keep the parser working. Files: src/app.py."


@pytest.fixture
def racing(settings: Any, session: Session) -> Iterator[type[RacingSummarizer]]:
    settings.CTXWEB_SUMMARIZER_CLASS = "tests.deploy.test_faults.RacingSummarizer"
    RacingSummarizer.session = session
    yield RacingSummarizer
    RacingSummarizer.races, RacingSummarizer.session = 0, None


def test_a_conflict_with_a_concurrent_compaction_is_retried_and_the_job_succeeds(
    session: Session, summary_only: CompactionProfile, racing: type[RacingSummarizer]
) -> None:
    racing.races = 1

    job = _run(session, summary_only)

    _assert_requeued(job, "conflict")
    assert Compaction.objects.filter(session=session).count() == 1, "only the winner's"
    _assert_sound(session)

    job = _run_again(job)

    assert job.status == CompactionJob.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    assert _phases(job).count("retry") == 1
    _assert_sound(session)


def test_a_second_conflict_fails_the_job_and_changes_nothing(
    session: Session, summary_only: CompactionProfile, racing: type[RacingSummarizer]
) -> None:
    racing.races = 2

    job = _run_again(_run(session, summary_only))

    assert job.status == CompactionJob.Status.FAILED
    assert job.attempts == MAX_ATTEMPTS
    assert job.error.startswith("conflict")
    assert "not retried again" in job.error
    won = Compaction.objects.filter(session=session, status=Compaction.Status.SUCCEEDED)
    assert [c.summarizer for c in won] == ["caller", "caller"], "only the winners' compactions"
    # The lost attempt is in the log as one failed row, which changed no entry.
    failed = Compaction.objects.filter(session=session, status=Compaction.Status.FAILED)
    assert failed.count() == 1
    assert not ContextEntry.objects.filter(compaction__in=failed).exists()
    _assert_sound(session)


_FAIL_AT_COMMIT = """
CREATE OR REPLACE FUNCTION ctxweb_test_fail_commit() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'simulated failure at COMMIT'; END $$ LANGUAGE plpgsql;
CREATE CONSTRAINT TRIGGER ctxweb_test_fail_commit AFTER INSERT ON sessions_app_compaction
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.status = 'succeeded')
EXECUTE FUNCTION ctxweb_test_fail_commit();
"""
_DROP_FAIL_AT_COMMIT = """
DROP TRIGGER IF EXISTS ctxweb_test_fail_commit ON sessions_app_compaction;
DROP FUNCTION IF EXISTS ctxweb_test_fail_commit();
"""


@pytest.fixture
def failing_commit(transactional_db: Any) -> Iterator[None]:
    """PostgreSQL: a deferred trigger that makes COMMIT itself fail for a new compaction."""
    if connection.vendor != "postgresql":
        pytest.skip("a deferred constraint trigger needs PostgreSQL")
    with connection.cursor() as cursor:
        cursor.execute(_FAIL_AT_COMMIT)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_DROP_FAIL_AT_COMMIT)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_failure_at_commit_on_postgresql_changes_nothing(
    failing_commit: None, session: Session, summary_only: CompactionProfile, blob_dir: Path
) -> None:
    before = context_fingerprint(session)

    job = _run(session, summary_only)

    _assert_requeued(job, "database_error")
    assert context_fingerprint(session) == before
    job = _run_again(job)

    assert job.status == CompactionJob.Status.FAILED
    assert job.attempts == MAX_ATTEMPTS
    assert "database_error" in job.error
    assert context_fingerprint(session) == before
    assert not any(blob_dir.rglob("*.json"))
    _assert_sound(session)


def test_an_offload_storage_failure_is_503_and_changes_nothing(
    settings: Any, session: Session, blob_dir: Path
) -> None:
    from django.test import Client

    from sessions_app.models import ApiKey

    settings.STORAGES = _storages(settings, "tests.deploy.faulty_storage.DiskFullStorage", blob_dir)
    _, key = ApiKey.issue(session.owner)
    before = context_fingerprint(session)

    response = Client(HTTP_AUTHORIZATION=f"Bearer {key}").post(
        f"/api/sessions/{session.pk}/offload", {"min_chars": 10}, content_type="application/json"
    )

    assert response.status_code == 503
    assert "storage unavailable" in response.json()["detail"]
    assert context_fingerprint(session) == before
    _assert_sound(session)
