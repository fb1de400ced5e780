"""Every sample transcript imports with its counts: messages, paired tool calls, subagents,
imported compaction points, skipped and kept-raw lines; and every runtime context is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction import blocks_of, validate_messages
from sessions_app.importers import ImportedSession, detect_format, parse
from tests.sessions_app import samples
from tests.sessions_app.samples import EXPECTED, WORKTREES


@pytest.fixture
def samples_dir() -> Path:
    return samples.samples_dir()


@pytest.fixture
def shared_dir() -> Path:
    return samples.shared_samples_dir()


def _check(session: ImportedSession, name: str) -> None:
    expected = EXPECTED[name]
    assert session.source_format == expected["format"]
    assert session.counts() == expected["counts"]
    assert [child.counts() for child in session.subagents] == expected["subagents"]
    for each in session.walk():
        assert validate_messages(list(each.history())) == []
        assert validate_messages(each.context_messages()) == []
        assert each.context, "a runtime context"


def test_every_sample_has_expected_counts(samples_dir: Path) -> None:
    assert samples.session_files(samples_dir) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_imports_with_counts(samples_dir: Path, name: str) -> None:
    session = parse(samples_dir / name)
    _check(session, name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_format_is_detected_from_content(samples_dir: Path, name: str) -> None:
    path = samples_dir / name
    data = path.read_bytes()
    assert detect_format(data) == EXPECTED[name]["format"]
    # The name never matters: the same bytes under another name import the same way.
    assert parse(data, name="upload.bin", subagents=False).source_format == EXPECTED[name]["format"]


def test_copies_match_the_shared_samples(shared_dir: Path) -> None:
    """Optional: where the shared folder exists, the repository's copies are still its
    files (the tests above then check the shared samples too)."""
    copies = samples.FIXTURE_SAMPLES
    for path in shared_dir.rglob("*"):
        if path.is_file():
            assert (copies / path.relative_to(shared_dir)).read_bytes() == path.read_bytes()


def test_worktrees_subagents_are_linked_to_their_agent_calls(samples_dir: Path) -> None:
    session = parse(samples_dir / WORKTREES)
    calls = {
        block["id"]: block
        for message in session.history()
        for block in blocks_of(message)
        if block.get("type") == "tool_use"
    }
    results = {}
    for item in session.messages:
        results.update(item.extra.get("tool_use_results", {}))
    assert len(session.subagents) == 6
    for child in session.subagents:
        call = calls[child.parent_tool_use_id]
        assert call["name"] == "Agent"
        # Claude Code's own record of the agent: same id and the same number of tool uses.
        data = results[child.parent_tool_use_id]
        assert data["agentId"] == child.external_id
        assert child.counts()["tool_calls"] == data["totalToolUseCount"]
        assert child.title == child.metadata["agent"]["description"] == call["input"]["description"]
        assert child.source_format == "claude_code"


def test_worktrees_merges_streamed_lines_per_response(samples_dir: Path) -> None:
    session = parse(samples_dir / WORKTREES, subagents=False)
    assert session.subagents == []
    ids = [m.original_id for m in session.messages if m.role == "assistant"]
    assert len(ids) == len(set(ids)), "one message per API response"
    six_creates = [
        m
        for m in session.messages
        if sum(1 for b in blocks_of(m.message) if b.get("name") == "TaskCreate") == 6
    ]
    assert len(six_creates) == 1
    assert len(six_creates[0].extra["uuids"]) == 8  # thinking, text, six tool_use lines
    assert six_creates[0].usage is not None
    assert session.model == "claude-opus-4-7"
    assert session.external_id == "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    assert session.messages[-3].message.get("is_meta") is True  # the local-command caveat


def test_cclog_rewind_keeps_the_newest_branch_and_the_compaction(samples_dir: Path) -> None:
    session = parse(samples_dir / "cclog_dag_compact_after_rewind.synthetic.jsonl")
    texts = [blocks_of(m)[0]["text"] for m in session.history()]
    assert "First attempt" not in texts
    assert "First answer" not in texts
    assert texts[:4] == ["Start", "Ready", "Second attempt", "Second answer"]
    (compaction,) = session.compactions
    assert (compaction.first_index, compaction.last_index) == (0, 5)
    assert compaction.pre_tokens == 150000
    assert compaction.trigger == "auto"
    assert compaction.raw["logicalParentUuid"] == "b2a2"
    assert compaction.summary.startswith("This session is being continued")
    assert [(c.kind, c.index) for c in session.context] == [
        ("summary", 0),
        ("message", 6),
        ("message", 7),
    ]
    assert session.metadata["abandoned_lines"] == 2


def test_coverage_file_compactions_nest(samples_dir: Path) -> None:
    session = parse(samples_dir / "agentsessions_claude_small.coverage.jsonl")
    first, second = session.compactions
    assert first.summary == "Summary of prior context."
    assert first.pre_tokens == 120000
    assert (first.first_index, first.last_index) == (None, None)  # nothing before it
    assert first.absorbed_by == 1
    assert second.raw["compactMetadata"]["preservedSegment"]
    assert second.post_tokens == 0
    assert session.title == "Stage0 small fixture"  # custom-title


def test_codex_coverage_compactions_and_pairs(samples_dir: Path) -> None:
    session = parse(samples_dir / "agentsessions_codex_small.coverage.jsonl")
    assert session.external_id == "019fc8be-3658-7ca3-9e29-000000000000"
    first = session.compactions[0]
    assert first.raw["window_id"] == "w-2"
    assert first.raw["replacement_history_items"] == 1
    assert [c.absorbed_by for c in session.compactions] == [1, 2, 3, 4, 5, None]
    assistant = session.messages[1].message
    names = [b["name"] for b in blocks_of(assistant) if b["type"] == "tool_use"]
    assert names == ["shell", "shell", "tool_search", "web_search"]
    results = blocks_of(session.messages[2].message)
    assert [b["tool_use_id"] for b in results] == ["call-2", "call-3", "call-1", "ws-1"]
    assert results[-1].get("ctxweb_synthetic") is True  # web search: no result recorded
