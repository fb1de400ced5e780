"""Background compactions: the job row, its run (the django-tasks task) and its heartbeat.

A job is queued as the django-tasks task `run_compaction_job` defined here, beside the job
logic (run by `manage.py db_worker`; `sessions_app.tasks` re-exports it, so task rows stored
under that older path still run). While it runs, a heartbeat thread stamps `heartbeat_at`; a
worker killed mid-job stops stamping, and `reap_stale_jobs` (services/background/reaper.py, run by
the
worker on start and periodically) fails the job and its task result, then queues it once
more.

A job of kind "prepare" (`PREPARE`) writes a compaction ahead of time, unapplied; no job
holds a connection while the summarizer answers (services/compacting/released.py).

A job whose failure left the session exactly as it was (the archive could not be written,
the database failed at commit, or a concurrent compaction of the same entries won) is
queued once more too, within the same MAX_ATTEMPTS. Summarizer failures are not: the
summarizer already retried them within the run.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any, Final

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone
from django_tasks import task

from compaction import CompactionEvent
from sessions_app.models import Compaction, CompactionJob, CompactionProfile, Session
from sessions_app.services.background.cooldown import note_outcome
from sessions_app.services.compacting.failed_attempts import (
    REFUSED,
    SummarizerSetupError,
    record_job_failure,
    setup_summarizer,
)
from sessions_app.services.compacting.prepared import prepare_compaction
from sessions_app.services.compacting.released import release_connections
from sessions_app.services.compacting.session_compaction import CompactionOutcome, compact_session
from sessions_app.services.errors import Conflict, ServiceError
from sessions_app.services.sessions.policies import profile_for

__all__ = [
    "MAX_ATTEMPTS",
    "PREPARE",
    "RETRIED_FAILURES",
    "Heartbeat",
    "JobRun",
    "active_job",
    "enqueue_compaction",
    "heartbeat_seconds",
    "queue_compaction",
    "retry_seconds",
    "run_compaction_job",
    "run_job",
    "stale_seconds",
]

logger = logging.getLogger("sessions_app")

#: A job is run at most this many times: the first run and one re-run after a lost worker
#: or a failure that left the session unchanged (RETRIED_FAILURES).
MAX_ATTEMPTS: Final = 2
#: Failure reasons after which the session is exactly as before, so a re-run is safe:
#: the archive write failed, the database failed at commit, a concurrent compaction won.
RETRIED_FAILURES: Final = ("archive_error", "database_error", "conflict")
_ACTIVE = (CompactionJob.Status.QUEUED, CompactionJob.Status.RUNNING)
_PARAMS = ("kind", "trigger", "profile", "instructions", "summary", "force")
#: The `kind` parameter of a job that prepares a compaction without applying it.
PREPARE: Final = "prepare"


def heartbeat_seconds() -> float:
    """How often a running job stamps its heartbeat (CTXWEB_JOB_HEARTBEAT_SECONDS, 5)."""
    return float(getattr(settings, "CTXWEB_JOB_HEARTBEAT_SECONDS", 5.0))


def stale_seconds() -> float:
    """A running job without a heartbeat for this long is lost (CTXWEB_JOB_STALE_SECONDS, 60)."""
    return float(getattr(settings, "CTXWEB_JOB_STALE_SECONDS", 60.0))


def retry_seconds() -> float:
    """How long a re-queued job waits before it runs again (CTXWEB_JOB_RETRY_SECONDS, 5)."""
    return float(getattr(settings, "CTXWEB_JOB_RETRY_SECONDS", 5.0))


def enqueue_compaction(session: Session, *, params: Mapping[str, Any]) -> CompactionJob:
    """Queue a background compaction of `session`; `params` as compact_session's keywords.

    A session has at most one active job: when one is already queued or running, it is
    returned instead and nothing is queued.
    """
    return queue_compaction(session, params=params)[0]


def queue_compaction(session: Session, *, params: Mapping[str, Any]) -> tuple[CompactionJob, bool]:
    """enqueue_compaction's job, and whether it was queued now (False: it was already active).
    A compaction asked for while the session's prepare job is still queued takes that job
    over (True): it compacts when it runs (docs/behaviour.md#prepared-compaction).

    The session row lock serializes concurrent callers on PostgreSQL: the second one sees
    the first job. SQLite takes no row lock; there ctxweb's IMMEDIATE transactions
    (settings.py) serialize them the same way. Whatever the database and its settings, the
    constraint `one_active_job_per_session` refuses a second active job, and a caller that
    lost gets the winner's job, as if it had seen it.
    """
    clean = {key: params[key] for key in _PARAMS if params.get(key) is not None}
    clean.setdefault("trigger", "manual")
    try:
        with transaction.atomic():
            _lock_session(session)
            running = active_job(session)
            if running is not None:
                return running, _took_over(running, clean)
            job = _queue_job(session, clean)
    except IntegrityError:
        running = active_job(session)
        if running is None:
            raise
        return running, False
    logger.info(
        "compaction queued",
        extra={"session_id": str(session.pk), "job": str(job.pk), "trigger": clean["trigger"]},
    )
    return job, True


def _took_over(job: CompactionJob, params: dict[str, Any]) -> bool:
    """True when `params` (a compaction) took over `job`, a still-queued prepare job."""
    if job.params.get("kind") != PREPARE or params.get("kind") == PREPARE:
        return False
    queued = CompactionJob.objects.filter(pk=job.pk, status=CompactionJob.Status.QUEUED)
    if not queued.update(params=params):  # the worker claimed it meanwhile
        return False
    job.params = params
    return True


def _lock_session(session: Session) -> None:
    """Lock the session's row until the transaction ends (a no-op on SQLite)."""
    Session.objects.select_for_update().filter(pk=session.pk).first()


def _queue_job(session: Session, params: dict[str, Any]) -> CompactionJob:
    """A new job row and its task (call inside a transaction)."""
    job = CompactionJob.objects.create(session=session, params=params, phase="queued")
    job.task_id = str(run_compaction_job.enqueue(str(job.pk)).id)
    CompactionJob.objects.filter(pk=job.pk, task_id="").update(task_id=job.task_id)
    return job


def active_job(session: Session) -> CompactionJob | None:
    """The queued or running job of `session`, if any."""
    return CompactionJob.objects.filter(session=session, status__in=_ACTIVE).first()


@dataclass(frozen=True, slots=True)
class JobRun:
    """What one run of a job did: its status afterwards (`lost`: the reaper took the job
    meanwhile), the compaction number, the error, the failure it is `retry`ing after, or
    `skipped` when the job was not queued any more."""

    job: str
    status: str = ""
    compaction: int | None = None
    error: str | None = None
    retry: str | None = None
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The task's result, as stored by django-tasks (JSON)."""
        if self.skipped:
            return {"job": self.job, "skipped": True}
        if self.retry is not None:
            return {
                "job": self.job,
                "status": self.status,
                "retry": self.retry,
                "error": self.error,
            }
        return {
            "job": self.job,
            "status": self.status,
            "compaction": self.compaction,
            "error": self.error,
        }


@task()
def run_compaction_job(job_id: str) -> dict[str, Any]:
    """The task: run the queued CompactionJob `job_id` (`run_job`); its JobRun as JSON."""
    return run_job(job_id).to_dict()


def run_job(job_id: str) -> JobRun:
    """Run a queued job (the task body): claim it, compact, record events and the outcome."""
    if not _claim(job_id):
        logger.info("job not queued any more; skipped", extra={"job": job_id})
        return JobRun(job_id, skipped=True)
    job = CompactionJob.objects.select_related("session").get(pk=job_id)
    recorder = _EventRecorder(job)
    params = job.params
    with Heartbeat(job.pk):
        try:
            profile = profile_for(job.session, params.get("profile"))
            outcome = _compact(job, profile, recorder)
            compaction = outcome.compaction
            reason = (compaction.failure_reason if compaction else None) or outcome.reason
            error = f"compaction failed: {reason}" if outcome.failed else ""
            if outcome.failed and reason in RETRIED_FAILURES:
                retried = _requeue(job, recorder, reason or "", error, compaction=compaction)
                if retried is not None:
                    return retried
                error = _final(error, job)
            if params.get("trigger") == "auto":
                note_outcome(job.session, outcome, profile)
        except SummarizerSetupError as setup:
            return _finish(job, recorder, failed=True, error=setup.text, compaction=setup.row)
        except Conflict as conflict:
            error = f"conflict: {conflict}"
            retried = _requeue(job, recorder, "conflict", error)
            if retried is not None:
                return retried
            row = record_job_failure(job.session, params, "conflict", conflict)
            return _finish(job, recorder, failed=True, error=_final(error, job), compaction=row)
        except ServiceError as refused:  # an unknown profile, storage down...: said plainly
            logger.warning("compaction job failed: %s", refused, extra={"job": job_id})
            row = record_job_failure(job.session, params, REFUSED, refused)
            text = f"compaction failed: {REFUSED}: {refused}"
            return _finish(job, recorder, failed=True, error=text, compaction=row)
        except Exception as failure:
            logger.exception("compaction job failed", extra={"job": job_id})
            detail = "".join(traceback.format_exception_only(type(failure), failure)).strip()
            return _finish(job, recorder, failed=True, error=detail)
    if outcome.failed:
        return _finish(job, recorder, failed=True, error=error, compaction=compaction)
    return _finish(
        job, recorder, failed=False, error="", compaction=compaction, reason=outcome.reason
    )


def _claim(job_id: str) -> bool:
    """Mark the job running (one more attempt) if it is still queued; False when it is not."""
    now = timezone.now()
    claimed = CompactionJob.objects.filter(pk=job_id, status=CompactionJob.Status.QUEUED).update(
        status=CompactionJob.Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=now,
        heartbeat_at=now,
        phase="started",
    )
    return bool(claimed)


def _compact(
    job: CompactionJob, profile: CompactionProfile, recorder: _EventRecorder
) -> CompactionOutcome:
    """compact_session with the job's parameters, its events recorded on the job (a job of
    kind PREPARE: prepare_compaction)."""
    params = job.params
    if params.get("kind") == PREPARE:
        summarizer = setup_summarizer(job.session, profile, Compaction.Trigger.AUTO)
        return prepare_compaction(job.session, profile, summarizer=summarizer, on_event=recorder)
    return compact_session(
        job.session,
        trigger=params.get("trigger", "manual"),
        profile=profile,
        instructions=params.get("instructions"),
        summary=params.get("summary"),
        force=params.get("force"),
        on_event=recorder,
        summarizer=None
        if params.get("summary") is not None
        else setup_summarizer(job.session, profile, params.get("trigger", "manual")),
    )


def _final(error: str, job: CompactionJob) -> str:
    """The error of a retryable failure that used up the attempts."""
    return f"{error} (attempt {job.attempts} of {MAX_ATTEMPTS}; not retried again)"


def _requeue(
    job: CompactionJob,
    recorder: _EventRecorder,
    reason: str,
    error: str,
    *,
    compaction: Any = None,
) -> JobRun | None:
    """Queue the job once more after a failure that left the session unchanged.

    Returns the run, or None when the attempts are used up (or the job is no
    longer this run's: the reaper took it meanwhile) and the job must be finished instead.
    """
    if job.attempts >= MAX_ATTEMPTS:
        return None
    with transaction.atomic():
        locked = CompactionJob.objects.select_for_update().filter(pk=job.pk).first()
        if locked is None or (locked.status, locked.attempts) != (
            CompactionJob.Status.RUNNING,
            job.attempts,
        ):
            return None
        note = {
            "phase": "retry",
            "reason": reason,
            "attempt": job.attempts,
            "detail": {"error": error},
            "compaction": compaction.number if compaction is not None else None,
            "at": timezone.now().isoformat(),
        }
        locked.status = CompactionJob.Status.QUEUED
        locked.phase = "requeued"
        locked.error = (
            f"{error}; the session is unchanged, so attempt {job.attempts + 1} of "
            f"{MAX_ATTEMPTS} was queued"
        )
        locked.events = [*recorder.events, note]
        locked.task_id = str(_retry_task().enqueue(str(job.pk)).id)
        locked.save(update_fields=["status", "phase", "error", "events", "task_id"])
    logger.warning(
        "compaction job re-queued: %s",
        locked.error,
        extra={"job": str(job.pk), "session_id": str(job.session_id), "reason": reason},
    )
    return JobRun(str(job.pk), locked.status, retry=reason, error=error)


def _retry_task() -> Any:
    """The task to queue for a re-run: deferred by retry_seconds() when the backend can."""
    delay = retry_seconds()
    if delay > 0 and run_compaction_job.get_backend().supports_defer:
        return run_compaction_job.using(run_after=timezone.now() + timedelta(seconds=delay))
    return run_compaction_job


def _finish(
    job: CompactionJob,
    recorder: _EventRecorder,
    *,
    failed: bool,
    error: str,
    compaction: Any = None,
    reason: str | None = None,
) -> JobRun:
    status = CompactionJob.Status.FAILED if failed else CompactionJob.Status.SUCCEEDED
    events = [
        *recorder.events,
        {"phase": "failed" if failed else "done", "reason": reason or error or None},
    ]
    updated = _this_run(job).update(
        status=status,
        phase="failed" if failed else "done",
        events=events,
        error=error,
        compaction=compaction,
        finished_at=timezone.now(),
    )
    if not updated:
        _log_lost(job, "finish")
        return JobRun(str(job.pk), "lost", error=error or None)
    number = compaction.number if compaction is not None else None
    return JobRun(str(job.pk), status, compaction=number, error=error or None)


def _this_run(job: CompactionJob) -> Any:
    """The job row while it is still this run's: running, at this run's attempt.

    A slow run whose job the reaper re-queued (and perhaps another worker re-ran) must not
    overwrite the job, so every write of a run goes through this filter.
    """
    return CompactionJob.objects.filter(
        pk=job.pk, status=CompactionJob.Status.RUNNING, attempts=job.attempts
    )


def _log_lost(job: CompactionJob, write: str) -> None:
    logger.warning(
        "compaction job is no longer this run's (reaped meanwhile); %s not written",
        write,
        extra={"job": str(job.pk), "session_id": str(job.session_id), "attempt": job.attempts},
    )


class _EventRecorder:
    """on_event for a job: each phase event stored on the job row as it happens."""

    def __init__(self, job: CompactionJob) -> None:
        self.job = job
        self.events: list[dict[str, Any]] = list(job.events)
        self.lost = False

    def __call__(self, event: CompactionEvent) -> None:
        self.events.append({**event.to_dict(), "at": timezone.now().isoformat()})
        if self.lost:
            return
        updated = _this_run(self.job).update(
            phase=event.phase, events=self.events, heartbeat_at=timezone.now()
        )
        release_connections()  # the summarizer may be called next
        if not updated:
            self.lost = True
            _log_lost(self.job, f"event {event.phase!r}")


class Heartbeat:
    """A daemon thread stamping a running job's `heartbeat_at` until the block ends."""

    def __init__(self, job_id: Any, interval: float | None = None) -> None:
        self.job_id = job_id
        self.interval = interval if interval is not None else heartbeat_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    CompactionJob.objects.filter(
                        pk=self.job_id, status=CompactionJob.Status.RUNNING
                    ).update(heartbeat_at=timezone.now())
                    release_connections()  # held no longer than the stamp
                except Exception:
                    logger.warning("heartbeat write failed", exc_info=True)
        finally:
            connection.close()
