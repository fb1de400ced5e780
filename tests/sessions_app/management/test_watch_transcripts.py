"""`manage.py watch_transcripts`: scanning folders once, twice, and its errors."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import Message, Session
from tests.sessions_app import samples

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
    assert second.strip().count("\n") == 0  # only the "watching ..." line
    assert Message.objects.count() == messages
    assert Session.objects.filter(owner=user, parent__isnull=True).count() == 2


def test_bad_arguments(user: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--interval"):
        _run(str(tmp_path), "--once", "--interval", "0", "--owner", user.username)
