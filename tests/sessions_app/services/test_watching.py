"""Watching transcripts grow: each appended line is read once, into the same session."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from sessions_app.models import Compaction, Message, Session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.importing import import_file
from sessions_app.services.importing.watching import Watcher, sync_file
from tests.sessions_app import samples
from tests.sessions_app.samples import WORKTREES
from tests.sessions_app.transcripts import (
    boundary,
    cc_assistant,
    cc_user,
    compact_summary,
    jsonl,
    preserved_session_lines,
    text,
    tool_result,
    tool_use,
)

pytestmark = pytest.mark.django_db

CLAUDE = WORKTREES
CODEX = "agentsessions_codex_small.coverage.jsonl"


def _history(session: Session) -> list[tuple[str, str]]:
    """Roles and contents in order (a sample's placeholder tool ids, made unique by a
    one-shot import as `id~2`, compared without that suffix)."""
    rows = Message.objects.filter(session=session).order_by("seq")
    return [(m.role, re.sub(r"~\d+'", "'", repr(m.content))) for m in rows]


def _reference(path: Path) -> Session:
    """The same file imported in one go, by another user."""
    other = get_user_model().objects.create_user("reference", password="x")
    return import_file(other, path).session


def _grow(lines: list[bytes], target: Path, watcher: Watcher) -> list[int]:
    """Append `lines` one by one, scanning after each; the compaction count after each."""
    counts = []
    for line in lines:
        with open(target, "ab") as file:
            file.write(line)
        watcher.scan()
        session = Session.objects.filter(source_path=str(target)).first()
        counts.append(session.compaction_count if session else 0)
    return counts


@pytest.mark.parametrize(
    "name",
    [
        CLAUDE,
        CODEX,
        "agentsessions_claude_small.coverage.jsonl",  # starts with sidechain lines
    ],
)
def test_a_transcript_appended_line_by_line_equals_a_one_shot_import(
    user: Any, tmp_path: Path, name: str
) -> None:
    source = samples.samples_dir() / name
    folder = tmp_path / "watched"
    folder.mkdir()
    target = folder / Path(name).name
    target.touch()
    watcher = Watcher(user, [folder])
    compactions = _grow(source.read_bytes().splitlines(keepends=True), target, watcher)
    [session] = Session.objects.filter(owner=user, parent__isnull=True)
    reference = _reference(source)
    assert _history(session) == _history(reference)  # grew, no duplicates, nothing missed
    assert session.compaction_count == reference.compaction_count
    assert compactions[-1] == reference.compaction_count
    assert session.context_tokens == reference.context_tokens
    assert session.created_at == reference.created_at  # the transcript's own times
    assert session.updated_at == reference.updated_at
    summaries = Compaction.objects.filter(session=session).order_by("number")
    assert [c.summary for c in summaries] == [
        c.summary for c in Compaction.objects.filter(session=reference).order_by("number")
    ]


def test_only_new_bytes_are_read_after_a_restart(user: Any, tmp_path: Path) -> None:
    source = samples.samples_dir() / CLAUDE
    lines = source.read_bytes().splitlines(keepends=True)
    target = tmp_path / Path(CLAUDE).name
    target.write_bytes(b"".join(lines[:40]))
    first = sync_file(user, target)
    session = Session.objects.get(pk=first.session_id)
    assert 0 < session.source_resume_offset <= session.source_offset == target.stat().st_size
    assert sync_file(user, target).added == 0  # nothing new: nothing read
    with open(target, "ab") as file:
        file.write(b"".join(lines[40:]))
    again = sync_file(user, target)  # a new watcher (a restart) resumes from the database
    assert again.added > 0
    assert not again.reread
    assert _history(Session.objects.get(pk=session.pk)) == _history(_reference(source))


def test_a_partial_last_line_waits_for_its_end(user: Any, tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    first = jsonl(cc_user("u1", None, "hello"), cc_assistant("a1", "u1", [text("hi")], "m1"))
    last = jsonl(cc_user("u2", "a1", "second question")).encode()
    target.write_bytes(first.encode() + last[:30])
    sync_file(user, target)
    session = Session.objects.get(owner=user)
    assert session.message_count == 2
    with open(target, "ab") as file:
        file.write(last[30:])
    sync_file(user, target)
    session.refresh_from_db()
    assert [m.content for m in Message.objects.filter(session=session).order_by("seq")][-1] == (
        "second question"
    )
    assert session.message_count == 3


def test_a_reply_streamed_over_several_scans_is_one_message(user: Any, tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_text(
        jsonl(cc_user("u1", None, "hello"), cc_assistant("a1", "u1", [text("one")], "m1"))
    )
    sync_file(user, target)
    with open(target, "a") as file:
        file.write(jsonl(cc_assistant("a2", "a1", [text("two")], "m1")))
    sync_file(user, target)
    session = Session.objects.get(owner=user)
    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert len(rows) == 2
    assert session.message_count == 2
    assert [b["text"] for b in rows[1].content] == ["one", "two"]
    assert session.history_tokens == sum(r.token_count for r in rows)


def test_a_truncated_or_replaced_file_is_read_again(user: Any, tmp_path: Path) -> None:
    source = samples.samples_dir() / CLAUDE
    lines = source.read_bytes().splitlines(keepends=True)
    target = tmp_path / Path(CLAUDE).name
    target.write_bytes(b"".join(lines))
    sync_file(user, target)
    session = Session.objects.get(owner=user, parent__isnull=True)
    before = _history(session)
    target.write_bytes(b"".join(lines[:30]))  # truncated
    assert sync_file(user, target).reread
    assert _history(session) == before  # history kept, nothing duplicated
    target.write_bytes(b"".join(lines))  # rewritten in full: same head, re-read from the cut
    sync_file(user, target)
    assert _history(session) == before
    assert Session.objects.filter(owner=user, parent__isnull=True).count() == 1


def test_subagent_transcripts_attach_to_their_parent(user: Any, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    shutil.copytree(samples.samples_dir() / Path(WORKTREES).parent, folder)
    Watcher(user, [folder]).scan()
    parent = Session.objects.get(owner=user, parent__isnull=True)
    reference = _reference(samples.samples_dir() / WORKTREES)
    children = {c.external_id: c for c in parent.subagents.all()}
    expected = {c.external_id: c for c in reference.subagents.all()}
    assert set(children) == set(expected)
    assert children
    for agent_id, child in children.items():
        assert child.parent_tool_use_id == expected[agent_id].parent_tool_use_id
        assert _history(child) == _history(expected[agent_id])


def test_reimporting_the_same_file_updates_the_same_session(user: Any, tmp_path: Path) -> None:
    source = samples.samples_dir() / CLAUDE
    lines = source.read_bytes().splitlines(keepends=True)
    partial = tmp_path / "part.jsonl"
    partial.write_bytes(b"".join(lines[:50]))
    first = import_file(user, partial.read_bytes(), name="upload.jsonl")
    again = import_file(user, source.read_bytes(), name="upload.jsonl")
    assert again.session.pk == first.session.pk
    assert not again.created
    assert again.new_messages == again.counts["messages"] - first.counts["messages"] > 0
    assert _history(again.session) == _history(_reference(source))
    third = import_file(user, source)  # the CLI's path (with subagent files): same session
    assert third.session.pk == first.session.pk
    assert not third.created
    assert third.session.message_count == again.session.message_count
    assert Session.objects.filter(owner=user, parent__isnull=True).count() == 1


def _compacted_lines() -> list[bytes]:
    """A Claude Code session compacted twice (the second one nests the first), as lines."""
    return [
        line.encode() + b"\n"
        for line in jsonl(
            cc_user("u1", None, "list the files"),
            cc_assistant("a1", "u1", [text("Listing."), tool_use("t1")], "m1"),
            cc_user("r1", "a1", [tool_result("t1", "a.txt")]),
            cc_assistant("a2", "r1", [text("One file.")], "m2"),
            boundary("b1", "a2"),
            compact_summary("s1", "b1", "The user listed the files."),
            cc_user("u2", "s1", "and now?"),
            cc_assistant("a3", "u2", [text("Nothing else.")], "m3"),
            boundary("b2", "a3"),
            compact_summary("s2", "b2", "Files listed, nothing else."),
            cc_user("u3", "s2", "thanks"),
            cc_assistant("a4", "u3", [text("You are welcome.")], "m4"),
        ).splitlines()
    ]


@pytest.mark.parametrize(
    "make",
    [
        _compacted_lines,
        lambda: [line.encode() + b"\n" for line in preserved_session_lines().splitlines()],
    ],
)
def test_markers_appear_as_boundaries_arrive(user: Any, tmp_path: Path, make: Any) -> None:
    lines = make()
    target = tmp_path / "watched" / "s.jsonl"
    target.parent.mkdir()
    target.touch()
    counts = _grow(lines, target, Watcher(user, [target.parent]))
    boundaries = [i for i, line in enumerate(lines) if b"compact_boundary" in line]
    for number, index in enumerate(boundaries):
        assert counts[index] == number  # a boundary waits for its summary line
        assert counts[index + 1] == number + 1  # and becomes a marker with it
    source = tmp_path / "whole.jsonl"
    source.write_bytes(b"".join(lines))
    reference = _reference(source)
    session = Session.objects.get(owner=user)
    assert _history(session) == _history(reference)
    assert runtime_messages(session) == runtime_messages(reference)
    mine = list(Compaction.objects.filter(session=session).order_by("number"))
    theirs = list(Compaction.objects.filter(session=reference).order_by("number"))
    assert [(c.summary, c.first_seq, c.last_seq) for c in mine] == [
        (c.summary, c.first_seq, c.last_seq) for c in theirs
    ]
    assert [c.parent_id is not None for c in mine] == [c.parent_id is not None for c in theirs]


def _totals(user: Any) -> tuple[int, int]:
    sessions = Session.objects.filter(owner=user)
    return (
        Message.objects.filter(session__in=sessions).count(),
        Compaction.objects.filter(session__in=sessions).count(),
    )


def test_the_counters_include_inline_subagents(user: Any, tmp_path: Path) -> None:
    """A Claude Code file with a sidechain read in one scan: its subagent's messages are
    stored with it, and counted."""
    source = samples.samples_dir() / "agentsessions_claude_small.coverage.jsonl"
    target = tmp_path / "watched" / "s.jsonl"
    target.parent.mkdir()
    shutil.copy(source, target)
    [sync] = Watcher(user, [target.parent]).scan()
    assert Session.objects.filter(owner=user, parent__isnull=False).exists()
    assert (sync.added, sync.compactions) == _totals(user)


@pytest.mark.parametrize("parts", [2, 5])
def test_the_counters_of_a_growing_file_add_up_to_what_it_stored(
    user: Any, tmp_path: Path, parts: int
) -> None:
    lines = (samples.samples_dir() / CODEX).read_bytes().splitlines(keepends=True)
    target = tmp_path / "watched" / "rollout.jsonl"
    target.parent.mkdir()
    target.touch()
    watcher = Watcher(user, [target.parent])
    size = -(-len(lines) // parts)
    added = compactions = 0
    for start in range(0, len(lines), size):
        with open(target, "ab") as file:
            file.write(b"".join(lines[start : start + size]))
        for sync in watcher.scan():
            added += sync.added
            compactions += sync.compactions
    assert (added, compactions) == _totals(user)
    assert compactions == samples.EXPECTED[CODEX]["counts"]["compactions"]


def _side(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "isSidechain": True, "agentId": "agent-1"}


_MAIN_START = [
    cc_user("u1", None, "Explore the repository"),
    cc_assistant("a1", "u1", [tool_use("t1", "Task", prompt="Look around")], "m1"),
]
_SIDECHAIN = [
    _side(cc_user("s1", None, "Look around")),
    _side(cc_assistant("s2", "s1", [text("Two files.")], "m-side")),
]
_MAIN_END = [
    cc_user("u2", "a1", [tool_result("t1", "Two files.")]),
    cc_assistant("a2", "u2", [text("The repository has two files.")], "m2"),
]


def _scan_parts(user: Any, path: Path, parts: list[list[dict[str, Any]]]) -> tuple[int, int]:
    """Write `parts` one after the other, a scan after each; (added, compactions) summed."""
    path.parent.mkdir(exist_ok=True)
    path.touch()
    watcher = Watcher(user, [path.parent])
    added = compactions = 0
    for part in parts:
        with open(path, "a") as file:
            file.write(jsonl(*part))
        for sync in watcher.scan():
            added += sync.added
            compactions += sync.compactions
    return added, compactions


def _child_history(user: Any) -> list[tuple[str, str]]:
    [child] = Session.objects.filter(owner=user, parent__isnull=False)
    return _history(child)


def test_an_inline_subagent_arriving_in_a_later_scan_is_stored_and_counted(
    user: Any, tmp_path: Path
) -> None:
    target = tmp_path / "watched" / "s.jsonl"
    counted = _scan_parts(user, target, [_MAIN_START, _SIDECHAIN[:1], _SIDECHAIN[1:], _MAIN_END])
    assert counted == _totals(user)
    [main] = Session.objects.filter(owner=user, parent__isnull=True)
    [child] = Session.objects.filter(owner=user, parent=main)
    assert child.parent_tool_use_id == "t1"
    reference = _reference(target)
    assert _history(main) == _history(reference)
    assert _child_history(user) == _history(Session.objects.get(parent=reference))
    assert [m.role for m in Message.objects.filter(session=child)] == ["user", "assistant"]


def test_a_file_that_starts_with_sidechain_lines_waits_for_its_main_thread(
    user: Any, tmp_path: Path
) -> None:
    target = tmp_path / "watched" / "s.jsonl"
    assert _scan_parts(user, target, [_SIDECHAIN]) == (0, 0)
    assert not Session.objects.filter(owner=user).exists()
    counted = _scan_parts(user, target, [_MAIN_START + _MAIN_END])
    assert counted == _totals(user) == (6, 0)
    [main] = Session.objects.filter(owner=user, parent__isnull=True)
    assert [m.role for m in Message.objects.filter(session=main)] == ["user", "assistant"] * 2
    [(role, prompt), (reply_role, _)] = _child_history(user)
    assert (role, reply_role) == ("user", "assistant")
    assert "Look around" in prompt


class _Clock:
    """A clock the test moves: `now` seconds since the epoch."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_file_of_sidechain_lines_only_is_stored_once_quiet_for_the_settle_period(
    user: Any, tmp_path: Path
) -> None:
    target = tmp_path / "watched" / "s.jsonl"
    target.parent.mkdir()
    target.write_text(jsonl(*_SIDECHAIN))
    clock = _Clock(target.stat().st_mtime + 1)
    watcher = Watcher(user, [target.parent], settle=60, clock=clock)

    assert watcher.scan() == []  # it may still get its main thread
    clock.now += 58
    assert watcher.scan() == []
    assert not Session.objects.filter(owner=user).exists()
    clock.now += 1  # quiet for 60 s, the file itself unchanged
    [sync] = watcher.scan()

    [session] = Session.objects.filter(owner=user)
    assert _history(session) == _history(_reference(target))  # as a one-shot import
    assert (sync.added, sync.compactions) == _totals(user) == (2, 0)
    assert watcher.scan() == []


def test_lines_after_a_stored_sidechain_only_file_are_added_to_its_session_once(
    user: Any, tmp_path: Path
) -> None:
    target = tmp_path / "watched" / "s.jsonl"
    target.parent.mkdir()
    target.write_text(jsonl(*_SIDECHAIN))
    [stored] = Watcher(user, [target.parent], settle=0).scan()
    with open(target, "a") as file:
        file.write(jsonl(*_MAIN_START, *_MAIN_END))

    [grown] = Watcher(user, [target.parent], settle=0).scan()  # a restarted watcher

    assert grown.session_id == stored.session_id
    assert grown.added == 4
    [session] = Session.objects.filter(owner=user)
    contents = [m.content for m in Message.objects.filter(session=session).order_by("seq")]
    assert contents[:3] == ["Look around", [text("Two files.")], "Explore the repository"]
    assert len(contents) == 6
