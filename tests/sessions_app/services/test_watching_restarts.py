"""Watched files that shrink or are replaced (issue 23 item 10; docs/behaviour.md, "Watched
files that shrink or are replaced"): what a session stored is kept, nothing is stored twice,
and a file that restarted with other content is a new session holding what a one-shot
import of the file holds, both marked with where the file restarted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Message, Session
from sessions_app.services.importing.watching import Watcher
from tests.sessions_app import samples
from tests.sessions_app.transcripts import cc_assistant, cc_user, jsonl, text
from tests.support.replay import describe, import_once

pytestmark = pytest.mark.django_db


def _conversation(tag: str, exchanges: int, session: str = "sess-1", start: int = 0) -> str:
    """`exchanges` prompts and replies with uuids of their own (`tag`)."""
    lines: list[dict[str, Any]] = []
    parent = None
    for number in range(start, start + exchanges):
        prompt, reply = f"{tag}-u{number}", f"{tag}-a{number}"
        lines.append({**cc_user(prompt, parent, f"{tag} question {number}"), "sessionId": session})
        lines.append(
            {
                **cc_assistant(reply, prompt, [text(f"{tag} answer {number}")], f"m-{reply}"),
                "sessionId": session,
            }
        )
        parent = reply
    return jsonl(*lines)


def _watch(folder: Path, user: Any) -> None:
    Watcher(user, [folder]).scan()  # a watcher each time: `watch_transcripts --once`


def _sessions(user: Any) -> list[Session]:
    """The owner's sessions, the one the file gave up first (their times come from the
    transcript, so they may tie)."""
    sessions = Session.objects.filter(owner=user, parent__isnull=True).order_by("created_at")
    return sorted(sessions, key=lambda s: "file_restarted" not in s.metadata)


def _text(message: Message) -> str:
    content = message.content
    return content if isinstance(content, str) else content[0]["text"]


def _count(session: Session) -> int:
    return Message.objects.filter(session=session).count()


def _assert_restarted(user: Any, path: Path, kept: int) -> None:
    """The earlier session keeps its `kept` messages; the new one is the file's import."""
    earlier, current = _sessions(user)
    assert _count(earlier) == kept
    assert earlier.source_path == ""
    assert current.source_path == str(path)
    assert earlier.metadata["file_restarted"]["next_session"] == str(current.pk)
    assert current.metadata["restarted_file"]["previous_session"] == str(earlier.pk)
    [reference] = import_once(path)
    assert reference in describe(user)  # one of the two is the file's import
    assert _count(current) == len(reference.messages)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    watched = tmp_path / "watched"
    watched.mkdir()
    return watched


def test_a_file_truncated_and_written_anew_is_a_new_session(user: Any, folder: Path) -> None:
    path = folder / "s.jsonl"
    path.write_text(_conversation("first", 5))
    _watch(folder, user)
    path.write_text("")  # truncated
    _watch(folder, user)
    assert _count(_sessions(user)[0]) == 10  # kept: history is append-only
    new = _conversation("second", 4)
    path.write_text(new[: len(new) // 2])  # regrown, ending in half a line
    _watch(folder, user)
    path.write_text(new)
    _watch(folder, user)
    _assert_restarted(user, path, kept=10)


def test_a_file_truncated_inside_and_regrown_with_other_lines(user: Any, folder: Path) -> None:
    path = folder / "s.jsonl"
    first = _conversation("first", 5)
    path.write_text(first)
    _watch(folder, user)
    kept = first[: first.index('"first-u2"')]
    kept = kept[: kept.rindex("\n") + 1]  # its first two exchanges
    path.write_text(kept)
    _watch(folder, user)
    assert len(_sessions(user)) == 1  # a truncated file: its session keeps what it had
    path.write_text(
        kept
        + _conversation("other", 3, start=2).replace(
            '"parentUuid": null', '"parentUuid": "first-a1"', 1
        )
    )
    _watch(folder, user)
    _assert_restarted(user, path, kept=10)


def test_a_file_truncated_and_rewritten_with_the_same_lines_stays_one_session(
    user: Any, folder: Path
) -> None:
    path = folder / "s.jsonl"
    first = _conversation("first", 5)
    path.write_text(first)
    _watch(folder, user)
    path.write_text(first[: len(first) // 3])
    _watch(folder, user)
    path.write_text(first + _conversation("more", 1))
    _watch(folder, user)
    [session] = _sessions(user)
    assert _count(session) == 12


def test_a_rotated_file_is_a_new_session(user: Any, folder: Path) -> None:
    path = folder / "s.jsonl"
    path.write_text(_conversation("first", 8))
    _watch(folder, user)
    path.rename(folder / "s.jsonl.1")  # rotated away (not a .jsonl: not watched)
    path.write_text(_conversation("later", 4))  # the same session id goes on in a new file
    _watch(folder, user)
    _assert_restarted(user, path, kept=16)


def test_a_file_replaced_by_another_conversation_is_a_new_session(user: Any, folder: Path) -> None:
    path = folder / "s.jsonl"
    path.write_text(_conversation("first", 6))
    _watch(folder, user)
    path.write_text(_conversation("another", 2, session="sess-2"))
    _watch(folder, user)
    _assert_restarted(user, path, kept=12)


def test_a_history_rewound_after_a_scan_goes_on_in_a_new_session(user: Any, folder: Path) -> None:
    source = samples.samples_dir() / "cclog_dag_compact_after_rewind.synthetic.jsonl"
    data = source.read_bytes()
    path = folder / source.name
    path.write_bytes(data[: data.index(b'"b2u"') + 3])  # the first branch, half a line after
    _watch(folder, user)
    assert len(_sessions(user)) == 1
    path.write_bytes(data)  # Claude Code rewound to "Ready" and took another branch
    _watch(folder, user)
    earlier, current = _sessions(user)
    assert [_text(m) for m in Message.objects.filter(session=earlier).order_by("seq")] == [
        "Start",
        "Ready",
        "First attempt",
        "First answer",
    ]
    _assert_restarted(user, path, kept=4)
    assert "First attempt" not in [_text(m) for m in Message.objects.filter(session=current)]
