"""At most one queued or running compaction job per session, kept by the database.

Before the constraint is added, a session with several active jobs (possible only where
nothing serialized the callers before this migration) keeps one: its running job, else its oldest queued one. The others
are failed; a worker that later picks up their task finds them not queued and skips them.
"""

from typing import Any

from django.db import migrations, models
from django.utils import timezone

_ACTIVE = ("queued", "running")
DUPLICATE_ERROR = "another compaction job of this session was already active; not run"


def fail_duplicates(apps: Any, schema_editor: Any) -> None:
    """Fail every active job of a session but one (its running job, else its oldest)."""
    del schema_editor
    job_model = apps.get_model("sessions_app", "CompactionJob")
    active = job_model.objects.filter(status__in=_ACTIVE)
    sessions = (
        active.values("session_id")
        .annotate(count=models.Count("id"))
        .filter(count__gt=1)
        .values_list("session_id", flat=True)
    )
    for session_id in list(sessions):
        jobs = sorted(
            active.filter(session_id=session_id),
            key=lambda job: (job.status != "running", job.created_at, str(job.pk)),
        )
        job_model.objects.filter(pk__in=[job.pk for job in jobs[1:]]).update(
            status="failed", phase="failed", error=DUPLICATE_ERROR, finished_at=timezone.now()
        )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0010_proxy_overhead")]

    operations = [
        migrations.RunPython(fail_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="compactionjob",
            constraint=models.UniqueConstraint(
                condition=models.Q(status__in=["queued", "running"]),
                fields=("session",),
                name="one_active_job_per_session",
            ),
        ),
    ]
