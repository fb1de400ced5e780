"""Run inside a ctxweb process on its own SQLite file (tests/deploy/test_sqlite_writers.py):
threads appending to shared sessions at once, as the web server's request threads do."""

from __future__ import annotations

import threading
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from sessions_app.models import Message, Session
from sessions_app.services.sessions.lifecycle import append_messages, create_session


def _turn(thread: int, turn: int) -> list[dict[str, Any]]:
    usage = {"input_tokens": 100 + turn, "output_tokens": 20}
    return [
        {"role": "user", "content": f"thread {thread} turn {turn}: check src/app/models.py"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}], "usage": usage},
    ]


def concurrent_appends(threads: int, turns: int, sessions: int) -> dict[str, Any]:
    """`threads` threads each append `turns` turns (user + assistant with usage) to one of
    `sessions` sessions (several threads per session); what was stored, and the errors."""
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("writers")
    made = [create_session(owner, title=f"shared {n}") for n in range(sessions)]
    errors: list[str] = []
    start = threading.Barrier(threads)

    def write(index: int) -> None:
        try:
            start.wait()
            session = Session.objects.get(pk=made[index % sessions].pk)
            for turn in range(turns):
                append_messages(session, _turn(index, turn))
        except Exception as error:  # counted: the test fails on any
            errors.append(f"{type(error).__name__}: {error}")
        finally:
            connection.close()

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    stored = {}
    for session in Session.objects.filter(pk__in=[s.pk for s in made]):
        seqs = list(Message.objects.filter(session=session).values_list("seq", flat=True))
        stored[str(session.pk)] = {
            "rows": len(seqs),
            "distinct_seqs": len(set(seqs)),
            "message_count": session.message_count,
        }
    return {"errors": errors, "stored": stored}
