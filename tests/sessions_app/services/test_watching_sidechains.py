"""Sidechain identity across partial reads: a transcript written in pieces (cut mid-line) and
scanned after each piece stores the same sessions as a one-shot import (issue 23 item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Session
from tests.sessions_app import samples
from tests.sessions_app.transcripts import cc_assistant, cc_user, text, tool_result, tool_use
from tests.support.replay import count, import_once, watch_in_chunks

pytestmark = pytest.mark.django_db


def _side(record: dict[str, Any]) -> dict[str, Any]:
    """A Claude Code 1.x sidechain line: no agentId, the main session's id."""
    return {**record, "isSidechain": True, "version": "1.0.98"}


def _subagent(name: str, prompt: str, steps: int) -> list[dict[str, Any]]:
    """A Task subagent's lines: its prompt (a root), then tool calls split over two lines of
    one response each, and their results."""
    lines = [_side(cc_user(f"{name}-0", None, prompt))]
    parent = f"{name}-0"
    for step in range(steps):
        mid, call = f"msg-{name}-{step}", f"toolu-{name}-{step}"
        lines.append(_side(cc_assistant(f"{name}-{step}a", parent, [text(f"Step {step}.")], mid)))
        lines.append(
            _side(cc_assistant(f"{name}-{step}b", f"{name}-{step}a", [tool_use(call)], mid))
        )
        lines.append(
            _side(cc_user(f"{name}-{step}r", f"{name}-{step}b", [tool_result(call, f"out {step}")]))
        )
        parent = f"{name}-{step}r"
    lines.append(_side(cc_assistant(f"{name}-end", parent, [text(f"{name} done.")], f"m-{name}")))
    return lines


def claude_1x_transcript() -> list[dict[str, Any]]:
    """A Claude Code 1.0.98 session: two Task calls in one reply, their sidechains written
    inline and interleaved, a third Task later, each answered by its result."""
    alpha, beta = _subagent("alpha", "Map the code", 6), _subagent("beta", "Read docs", 4)
    gamma = _subagent("gamma", "Write tests", 5)
    calls = [
        tool_use("task-1", "Task", prompt="Map the code"),
        tool_use("task-2", "Task", prompt="Read docs"),
    ]
    lines = [
        cc_user("u1", None, "Explore the repository"),
        cc_assistant("a1", "u1", calls, "m1"),
    ]
    for index in range(max(len(alpha), len(beta))):  # two subagents at once
        lines += [*alpha[index : index + 1], *beta[index : index + 1]]
    lines += [
        cc_user("r1", "a1", [tool_result("task-1", "Mapped.")]),
        cc_user("r2", "r1", [tool_result("task-2", "Read.")]),
        cc_assistant("a2", "r2", [tool_use("task-3", "Task", prompt="Write tests")], "m2"),
        *gamma,
        cc_user("r3", "a2", [tool_result("task-3", "Tested.")]),
        cc_assistant("a3", "r3", [text("All done.")], "m3"),
    ]
    return [{**line, "version": "1.0.98"} for line in lines]


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "source" / "c0ffee00-1111-2222-3333-444455556666.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(line) + "\n" for line in claude_1x_transcript()))
    return path


def _mid_line_cuts(path: Path, pieces: int) -> list[int]:
    """Offsets cutting `path` into `pieces`, each cut in the middle of a line."""
    data = path.read_bytes()
    cuts = []
    for k in range(1, pieces):
        end = data.index(b"\n", len(data) * k // pieces)
        cuts.append(end - 5)
    return cuts


def test_a_1x_transcript_written_in_three_pieces_stores_what_a_one_shot_import_does(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path)
    once = import_once(path)
    watched = watch_in_chunks(path, _mid_line_cuts(path, 3), tmp_path / "watched")
    assert count(once) == 4  # the main session and its three subagents
    assert [child.parent_tool_use_id for child in once[0].children] != ["", "", ""]
    assert watched == once


@pytest.mark.parametrize("pieces", [2, 5, 8])
def test_a_1x_transcript_in_more_pieces_too(tmp_path: Path, pieces: int) -> None:
    path = _write(tmp_path)
    assert watch_in_chunks(path, _mid_line_cuts(path, pieces), tmp_path / "w") == import_once(path)


@pytest.mark.parametrize(
    "name",
    [
        samples.WORKTREES,  # Claude Code 2.x: subagents/agent-*.jsonl
        "agentsessions_codex_small.coverage.jsonl",
        "agentsessions_claude_small.coverage.jsonl",  # sidechain lines of its own
    ],
)
def test_a_sample_written_in_three_pieces_stores_what_a_one_shot_import_does(
    tmp_path: Path, name: str
) -> None:
    path = samples.samples_dir() / name
    once = import_once(path)
    assert watch_in_chunks(path, _mid_line_cuts(path, 3), tmp_path / "w") == once


def test_a_sidechain_continued_in_a_later_scan_goes_to_its_session(tmp_path: Path) -> None:
    path = _write(tmp_path)
    data = path.read_bytes()
    middle = data.index(b'"alpha-3r"')  # inside alpha's sidechain
    watch_in_chunks(path, [middle], tmp_path / "w")
    children = Session.objects.filter(parent__isnull=False, title__startswith="Map the code")
    assert children.count() == 1
