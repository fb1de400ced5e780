"""Where the sample transcripts are, and what importing each one must give.

The samples are part of the repository (tests/fixtures/samples, byte-for-byte copies of MIT
files, attributed in its SOURCES.md and LICENSES.md), so the tests that use them always run,
in a fresh clone too. The shared folder they came from (<repo>/../shared/samples) is only
compared with the copies, when it is present.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

REPO: Final = Path(__file__).resolve().parents[2]
FIXTURE_SAMPLES: Final = REPO / "tests" / "fixtures" / "samples"
SHARED_SAMPLES: Final = REPO.parent / "shared" / "samples"

WORKTREES: Final = "claude-code-worktrees-session/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"


def samples_dir() -> Path:
    """The sample folder of the repository (never skipped: a missing copy is a failure)."""
    assert (FIXTURE_SAMPLES / "SOURCES.md").is_file(), f"{FIXTURE_SAMPLES} is incomplete"
    return FIXTURE_SAMPLES


def shared_samples_dir() -> Path:
    """The shared sample folder beside the clone; skips the test when it is absent."""
    if not (SHARED_SAMPLES / "SOURCES.md").is_file():
        pytest.skip(f"no shared samples at {SHARED_SAMPLES}")
    return SHARED_SAMPLES


def session_files(folder: Path) -> list[str]:
    """Every importable sample (subagent files and .meta.json come with their session)."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file()
        and path.suffix != ".md"
        and "subagents" not in path.parts
        and not path.name.endswith(".meta.json")
    )


def counts(
    messages: int,
    tool_calls: int,
    *,
    synthetic: int = 0,
    compactions: int = 0,
    subagents: int = 0,
    skipped: int = 0,
    kept_raw: int = 0,
) -> dict[str, int]:
    """An ImportedSession.counts() value (tool results = tool calls: all paired)."""
    return {
        "messages": messages,
        "tool_calls": tool_calls,
        "tool_results": tool_calls,
        "synthetic_results": synthetic,
        "compactions": compactions,
        "subagents": subagents,
        "skipped": skipped,
        "kept_raw": kept_raw,
    }


#: Per sample: format, the main session's counts, and each subagent's counts in order.
EXPECTED: Final[dict[str, dict[str, Any]]] = {
    "agentsessions_claude_small.coverage.jsonl": {
        "format": "claude_code",
        "counts": counts(7, 2, synthetic=1, compactions=2, subagents=1, kept_raw=68),
        "subagents": [counts(4, 1)],
    },
    "agentsessions_codex_small.coverage.jsonl": {
        "format": "codex",
        "counts": counts(16, 8, synthetic=3, compactions=6, kept_raw=91),
        "subagents": [],
    },
    "basic_gui_mode.json": {
        "format": "openhands",
        "counts": counts(10, 4, kept_raw=8),
        "subagents": [],
    },
    "cclog_dag_compact_after_rewind.synthetic.jsonl": {
        "format": "claude_code",
        "counts": counts(8, 0, compactions=1, kept_raw=2),
        "subagents": [],
    },
    WORKTREES: {
        "format": "claude_code",
        "counts": counts(37, 40, subagents=6, kept_raw=73),
        "subagents": [
            counts(30, 17),
            counts(31, 17),
            counts(40, 24),
            counts(10, 6),
            counts(10, 6),
            counts(12, 7),
        ],
    },
    "marshmallow-1867_function_calling.traj": {
        "format": "swe_agent",
        "counts": counts(28, 13),
        "subagents": [],
    },
}
