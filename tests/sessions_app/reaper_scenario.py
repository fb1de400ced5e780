"""Helper processes of the reaper test (run with DJANGO_SETTINGS_MODULE=...worker_settings).

`python -m tests.sessions_app.reaper_scenario setup` creates a session and queues a
compaction job (prints its id); `inspect JOB` prints the job and its task results as JSON.
`HangOnceSummarizer` hangs on its first call in any process (a marker file records it), so
the first worker can be killed mid-job, and answers at once afterwards.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

MARKER = "summarizer-started"


class HangOnceSummarizer:
    name = "hang-once"

    def __init__(self, profile: Any) -> None:
        from django.conf import settings

        self.marker = Path(settings.DATA_DIR) / MARKER

    def summarize(self, request: Any) -> str:
        if not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            time.sleep(120)  # killed long before this ends
        return "Goals and key decisions:\n- summary written after the worker was lost"


def setup() -> str:
    from django.contrib.auth import get_user_model

    from sessions_app.models import CompactionProfile
    from sessions_app.services.background.jobs import enqueue_compaction
    from sessions_app.services.sessions.lifecycle import create_session
    from tests.support.histories import synthetic_history

    owner = get_user_model().objects.create_user("worker-test")
    profile = CompactionProfile.objects.create(
        name="reaper", keep_recent_messages=4, steps=["summary"], retry_backoff_seconds=0
    )
    session = create_session(
        owner, messages=synthetic_history(73, tool_every=2), context_limit=3000, profile=profile
    )
    return str(enqueue_compaction(session, params={"trigger": "manual"}).pk)


def inspect(job_id: str) -> dict[str, Any]:
    from django_tasks_db.models import DBTaskResult

    from sessions_app.models import Compaction, CompactionJob

    job = CompactionJob.objects.get(pk=job_id)
    return {
        "status": job.status,
        "attempts": job.attempts,
        "phases": [event.get("phase") for event in job.events],
        "error": job.error,
        "task_id": job.task_id,
        "compaction": job.compaction.number if job.compaction else None,
        "tasks": {
            str(row.id): row.status for row in DBTaskResult.objects.all().order_by("enqueued_at")
        },
        "task_errors": list(DBTaskResult.objects.values_list("exception_class_path", flat=True)),
        "compactions": list(Compaction.objects.values_list("number", "status")),
    }


def main(argv: list[str]) -> None:
    import django

    django.setup()
    if argv[0] == "setup":
        print(setup())
    else:
        print(json.dumps(inspect(argv[1])))


if __name__ == "__main__":
    main(sys.argv[1:])
