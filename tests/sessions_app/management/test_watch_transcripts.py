"""`manage.py watch_transcripts`: scanning folders once, twice, and its errors."""

from __future__ import annotations

import io
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import Message, Session
from tests.sessions_app import samples
from tests.sessions_app.transcripts import cc_assistant, cc_user, jsonl, text

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("watch_transcripts", *args, stdout=out)
    return out.getvalue()


def test_once_twice_imports_nothing_new(user: Any, tmp_path: Path) -> None:
    tmp_path = tmp_path / "watched"  # the tests' media files live in tmp_path itself
    tmp_path.mkdir()
    for name in (
        "agentsessions_claude_small.coverage.jsonl",
        "agentsessions_codex_small.coverage.jsonl",
    ):
        shutil.copy(samples.samples_dir() / name, tmp_path / name)
    (tmp_path / "notes.jsonl").write_text('{"not": "a transcript"}\n')
    first = _run(str(tmp_path), "--once", "--owner", user.username)
    assert first.count("+") >= 2
    messages = Message.objects.count()
    second = _run(str(tmp_path), "--once", "--owner", user.username)
    # A line for each file it already holds (issue 29: it printed nothing for them).
    held = [line for line in second.splitlines() if "already held, nothing new ->" in line]
    assert len(held) == 2
    assert "+" not in second
    assert sorted(line.split(":")[0] for line in held) == sorted(
        str(tmp_path / name) for name in os.listdir(tmp_path) if name != "notes.jsonl"
    )
    assert Message.objects.count() == messages
    assert Session.objects.filter(owner=user, parent__isnull=True).count() == 2


def test_once_stores_a_file_of_sidechain_lines_only_when_quiet_for_the_settle_period(
    user: Any, tmp_path: Path
) -> None:
    side = {"isSidechain": True, "agentId": "agent-1"}
    lines = [
        {**cc_user("s1", None, "Look around"), **side},
        {**cc_assistant("s2", "s1", [text("Two files.")], "m-side"), **side},
    ]
    folder = tmp_path / "watched"
    folder.mkdir()
    quiet, fresh = folder / "quiet.jsonl", folder / "fresh.jsonl"
    for path in (quiet, fresh):
        path.write_text(jsonl(*lines))
    two_minutes_ago = time.time() - 120
    os.utime(quiet, (two_minutes_ago, two_minutes_ago))

    out = _run(str(folder), "--once", "--settle", "90", "--owner", user.username)

    assert "quiet.jsonl: +2 messages" in out
    assert [s.source_path for s in Session.objects.filter(owner=user)] == [str(quiet)]


def test_bad_arguments(user: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--interval"):
        _run(str(tmp_path), "--once", "--interval", "0", "--owner", user.username)
    with pytest.raises(CommandError, match="--settle"):
        _run(str(tmp_path), "--once", "--settle", "-1", "--owner", user.username)
