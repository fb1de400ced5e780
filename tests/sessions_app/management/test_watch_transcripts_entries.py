"""`manage.py watch_transcripts --once` over a growing 1.x transcript and a bad entry."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from sessions_app.models import Session
from tests.sessions_app.services.test_watching_sidechains import claude_1x_transcript
from tests.sessions_app.transcripts import cc_assistant, cc_user, jsonl, text
from tests.support.replay import describe, import_once

pytestmark = pytest.mark.django_db


def _once(folder: Path, user: Any) -> str:
    out = io.StringIO()
    call_command("watch_transcripts", str(folder), "--once", "--owner", user.username, stdout=out)
    return out.getvalue()


def test_a_1x_transcript_written_in_three_pieces_with_a_scan_after_each(
    user: Any, tmp_path: Path
) -> None:
    data = "".join(json.dumps(line) + "\n" for line in claude_1x_transcript()).encode()
    folder = tmp_path / "watched"
    folder.mkdir()
    path = folder / "c0ffee00-1111-2222-3333-444455556666.jsonl"
    ends = [data.index(b"\n", len(data) * k // 3) - 4 for k in (1, 2)] + [len(data)]
    written = 0
    for end in ends:  # each piece but the last ends in half a line
        with open(path, "ab") as file:
            file.write(data[written:end])
        written = end
        _once(folder, user)
    assert Session.objects.filter(owner=user).count() == 4  # not 4 + a copy per scan
    assert describe(user) == import_once(path)


def test_a_symlink_loop_does_not_stop_the_watcher(user: Any, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "good.jsonl").write_text(
        jsonl(cc_user("u1", None, "Hello"), cc_assistant("a1", "u1", [text("Hi.")], "m1"))
    )
    output = _once(folder, user)  # returns: no exit 1
    assert "good.jsonl: +2 messages" in output
