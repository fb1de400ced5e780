"""A background compaction's progress list: each phase done, skipped, current, failed or todo.

The phases come from the job's events (the engine's `selective_start`, `summary_start`, ...
and the job's own `retry`, `failed` and `done` notes). Only the last attempt counts: a
re-queued job starts its list afresh. A failed job marks the phase that actually failed:
the step that started and never finished (the summary, the pruning), or committing when
the result could not be stored; a step the profile does not have is never marked failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sessions_app.models import CompactionJob

__all__ = [
    "COMMIT_FAILURES",
    "PHASES",
    "failed_phase",
    "job_failure",
    "job_outcome",
    "job_phases",
    "job_view",
]

#: The phases a background compaction goes through, as shown in its progress list.
PHASES: Final = (
    ("queued", "Queued"),
    ("started", "Started"),
    ("selective", "Pruning old tool blocks"),
    ("summary", "Summarizing"),
    ("commit", "Committing"),
    ("done", "Done"),
)
#: Failure reasons of a result that could not be stored (services/background/jobs.py
#: RETRIED_FAILURES).
COMMIT_FAILURES: Final = frozenset({"archive_error", "database_error", "conflict"})
#: Engine steps that report `<step>_start` and `<step>_done`, innermost last.
_STEPS: Final = ("summary", "selective")


def _events(job: CompactionJob) -> list[Mapping[str, Any]]:
    """The events of the job's last attempt (after its last `retry` note)."""
    events = [e for e in job.events if isinstance(e, Mapping)]
    retries = [i for i, e in enumerate(events) if e.get("phase") == "retry"]
    return events[retries[-1] + 1 :] if retries else events


def _phase_names(events: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(e.get("phase", "")) for e in events}


def failed_phase(job: CompactionJob) -> str | None:
    """The key of the phase that failed (None unless the job failed)."""
    if job.status != CompactionJob.Status.FAILED:
        return None
    events = _events(job)
    names = _phase_names(events)
    reasons = {str(e.get("reason") or "") for e in events if e.get("phase") == "rollback"}
    compaction = job.compaction
    if compaction is not None and compaction.failure_reason:
        reasons.add(compaction.failure_reason)
    if reasons & COMMIT_FAILURES or str(job.error).startswith("conflict"):
        return "commit"
    for step in _STEPS:
        if f"{step}_start" in names and f"{step}_done" not in names:
            return step
    if "compaction_done" in names or "summary_done" in names:
        return "commit"
    return "started"


def job_phases(job: CompactionJob) -> list[tuple[str, str, str]]:
    """(key, label, state) of each phase: done, skipped, current, failed or todo."""
    seen = {name.split("_")[0] for name in _phase_names(_events(job))}
    seen.add("queued")
    if job.status != CompactionJob.Status.QUEUED:
        seen.add("started")
    if job.status == CompactionJob.Status.SUCCEEDED:
        seen |= {"commit", "done"}
    failed = failed_phase(job)
    keys = [key for key, _ in PHASES]
    last = max(keys.index(key) for key in seen if key in keys)
    states = []
    for index, (key, label) in enumerate(PHASES):
        if key == failed:
            state = "failed"
        elif failed and index > keys.index(failed):
            state = "todo"
        elif key in seen:
            state = "done"
        elif index < last:
            state = "skipped"
        elif index == last + 1 and not failed:
            state = "current"
        else:
            state = "todo"
        states.append((key, _chunk_label(job) if key == "summary" else label, state))
    return states


def _chunk_label(job: CompactionJob) -> str:
    """`Summarizing`, with the part in progress when the middle is summarized in parts."""
    chunks = [
        e["detail"]
        for e in _events(job)
        if e.get("phase") == "summary_chunk" and isinstance(e.get("detail"), Mapping)
    ]
    if not chunks or job.status != CompactionJob.Status.RUNNING:
        return "Summarizing"
    latest = chunks[-1]
    if latest.get("merge"):
        return "Summarizing (merging the parts)"
    return f"Summarizing (part {latest.get('chunk')} of {latest.get('chunks')})"


def job_outcome(job: CompactionJob) -> tuple[str, str]:
    """(css key, label) of what the job came to: a job that compacted nothing is `empty`
    (never a green "succeeded"), one whose compaction failed is `failed`."""
    status = str(job.status)
    compaction = job.compaction
    if status == CompactionJob.Status.FAILED or (
        compaction is not None and compaction.status == "failed"
    ):
        return "failed", "failed"
    if status == CompactionJob.Status.SUCCEEDED and compaction is None:
        return "empty", "nothing compacted"
    return status, status


def job_failure(job: CompactionJob) -> Mapping[str, Any] | None:
    """The underlying error of a failed job's compaction (details["error"]), if recorded."""
    compaction = job.compaction
    if compaction is None or compaction.status != "failed":
        return None
    error = compaction.details.get("error") if isinstance(compaction.details, Mapping) else None
    if isinstance(error, Mapping):
        return error
    reason = compaction.failure_reason
    return {"reason": reason, "message": str(error or reason), "type": None, "status": None}


def job_view(job: CompactionJob) -> dict[str, Any]:
    """The template context of a job's progress (templates/sessions/_actions.html#job)."""
    done = job.status in {CompactionJob.Status.SUCCEEDED, CompactionJob.Status.FAILED}
    outcome, label = job_outcome(job)
    failed = failed_phase(job)
    failure = job_failure(job)
    error = str(job.error or "")
    if failure is not None:
        said = f"compaction failed: {failure.get('reason')}"
        if error in {said, f"{said}: {failure.get('message')}"}:
            error = ""  # the failure notice says this and more
    return {
        "job": job,
        "done": done,
        "phases": job_phases(job),
        "outcome": outcome,
        "outcome_label": label,
        "failure": failure,
        "error_note": error,
        "failed_label": dict(PHASES).get(failed or "", "running"),
    }
