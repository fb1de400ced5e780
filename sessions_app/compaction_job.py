"""Background compaction jobs: one row per run, its status, phase events and errors.

Re-exported by sessions_app.models (where Django looks for the app's models); the runs
themselves are services/background/jobs.py's.
"""

from __future__ import annotations

import uuid

from django.db import models

__all__ = ["CompactionJob"]


class CompactionJob(models.Model):
    """A background compaction: status, phase events and errors, shown by /api/jobs/{id}."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="jobs"
    )
    task_id = models.CharField(max_length=64, blank=True, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    phase = models.CharField(max_length=32, blank=True)
    events = models.JSONField(default=list, blank=True)
    params = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    compaction = models.ForeignKey(
        "sessions_app.Compaction",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]
        constraints = [
            # At most one queued or running job per session, on every database, whatever
            # serializes the callers of services/background/jobs.queue_compaction (or fails to).
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_active_job_per_session",
            )
        ]

    def __str__(self) -> str:
        return f"Job {self.id} ({self.status})"
