"""File views: which tool calls show a file, and the source inside their results."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.file_views import (
    file_view_path,
    file_view_sources,
    strip_line_numbers,
)
from compaction.folding import SourceFile
from compaction.policy import Policy

TOOLS = Policy().file_view_tools


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "t", "name": name, "input": arguments}


@pytest.mark.parametrize(
    ("block", "path"),
    [
        (use("Read", file_path="/src/a.py"), "/src/a.py"),
        (use("read_file", path="a.go"), "a.go"),
        (use("view_file", filename="a.rs"), "a.rs"),
        (use("str_replace_editor", command="view", path="/repo/x.py"), "/repo/x.py"),
        (use("str_replace_editor", command="create", path="/repo/x.py"), None),
        (use("Bash", command="cat a.py"), None),
        (use("Read"), None),
        (use("Read", file_path=""), None),
        ({"type": "text", "text": "Read"}, None),
    ],
)
def test_file_view_path(block: dict[str, Any], path: str | None) -> None:
    assert file_view_path(block, TOOLS) == path


def test_file_view_tools_are_configurable() -> None:
    assert file_view_path(use("Open", path="a.py"), ("Open",)) == "a.py"
    assert file_view_path(use("Read", file_path="a.py"), ("Open",)) is None


def test_claude_code_arrow_numbers_are_stripped() -> None:
    text = "     1→import os\n     2→\n     3→def main():\n     4→    pass"
    assert strip_line_numbers(text) == ("import os\n\ndef main():\n    pass\n", 1)


def test_cat_n_tab_numbers_are_stripped_and_a_banner_dropped() -> None:
    text = (
        "Here's the result of running `cat -n` on /repo/a.py:\n"
        "    41\tdef a():\n"
        "    42\t    return 1\n"
    )
    assert strip_line_numbers(text) == ("def a():\n    return 1\n", 41)


def test_unnumbered_text_is_left_alone() -> None:
    text = "def a():\n    return 1\n"
    assert strip_line_numbers(text) == (text, 1)


def test_mostly_unnumbered_text_is_left_alone() -> None:
    text = "1\tone\nplain\nplain\nplain\n"
    assert strip_line_numbers(text) == (text, 1)


def test_file_view_sources_pairs_calls_with_results() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": [
                use("Read", file_path="a.py") | {"id": "r1"},
                use("Bash", command="ls") | {"id": "b1"},
                use("Read", file_path="missing.py") | {"id": "r2"},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "r1", "content": "     7→def a(): pass"},
                {"type": "tool_result", "tool_use_id": "b1", "content": "a.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "r2",
                    "content": "no file",
                    "is_error": True,
                },
            ],
        },
    ]
    assert file_view_sources(messages) == [SourceFile("a.py", "def a(): pass\n", 7)]


# Outlines for a summary: each distinct file folded once (issue 14) ------------------------

from hypothesis import settings  # noqa: E402

from compaction import compact_messages  # noqa: E402
from compaction.file_views import file_view_outlines  # noqa: E402
from compaction.folding import fold, fold_views, outline  # noqa: E402
from compaction.messages import message_text  # noqa: E402
from compaction.summarizers.scripted import ScriptedSummarizer  # noqa: E402
from compaction.tokens import count_text_tokens  # noqa: E402
from tests.support.encoded import recording_encodes  # noqa: E402


def module_source(number: int, functions: int) -> str:
    return f"class Model{number}:\n    pass\n\n\n" + "".join(
        f"def helper_{number}_{i}():\n    return {i}\n\n\n" for i in range(functions)
    )


def reference_outlines(files: list[SourceFile], policy: Policy) -> str:
    """The summary's outlines by their definition: fold each file, newest first, keeping
    those smaller than their source until the kept ones exceed the budget; then join the
    kept ones in viewing order, or fold them again together when over the budget."""
    kept: list[tuple[SourceFile, Any]] = []
    for file in reversed(files):
        if sum(folded.tokens for _, folded in kept) > policy.fold_max_tokens:
            break
        folded = fold([file], policy=policy)
        if file.source.strip() and folded.tokens < count_text_tokens(file.source):
            kept.insert(0, (file, folded))
    if sum(folded.tokens for _, folded in kept) <= policy.fold_max_tokens:
        return "\n".join(folded.text for _, folded in kept)
    return fold([file for file, _ in kept], policy=policy).text


_FILES = st.lists(
    st.builds(
        lambda n, k, line: SourceFile(f"pkg/m{n}.py", module_source(n, k), line),
        st.integers(0, 5),
        st.integers(0, 30),
        st.sampled_from([1, 1, 40]),
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(_FILES, st.sampled_from([1, 60, 300, 10_000]))
def test_fold_views_gives_what_folding_each_file_then_all_gave(files, budget):
    policy = Policy(fold_max_tokens=budget)
    assert fold_views(files, policy) == reference_outlines(files, policy)


def test_views_beyond_the_spent_fold_budget_are_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    original = outline._parse

    def parse(spec: Any, data: bytes) -> Any:
        parsed.append(data)
        return original(spec, data)

    monkeypatch.setattr(outline, "_parse", parse)
    outline.clear_outline_cache()
    files = [SourceFile(f"pkg/m{n}.py", module_source(n, 30)) for n in range(20)]
    one = fold([files[-1]]).tokens
    text = fold_views(files, Policy(fold_max_tokens=one * 3))
    assert len(parsed) == 4  # three fill the budget, the fourth crosses it
    assert "pkg/m19.py" in text
    assert "pkg/m16.py" in text
    assert "pkg/m15.py" not in text
    assert text.index("pkg/m16.py") < text.index("pkg/m19.py")  # in viewing order


def read_round(number: int, path: str, source: str) -> list[dict[str, Any]]:
    tool_id = f"toolu_{number}"
    return [
        {"role": "user", "content": f"Step {number}: look at {path}"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": path}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": source}],
        },
        {"role": "assistant", "content": f"Read {path}."},
    ]


def reading_history(rounds: int, files: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for number in range(rounds):
        index = number % files
        history += read_round(number, f"src/m{index}.py", module_source(index, 40))
    return history


def test_a_compaction_parses_each_distinct_file_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parses: list[str] = []
    original = outline._parse

    def parse(spec: Any, data: bytes) -> Any:
        parses.append(data.decode())
        return original(spec, data)

    monkeypatch.setattr(outline, "_parse", parse)
    outline.clear_outline_cache()
    history = reading_history(rounds=60, files=5)  # every file read 12 times
    # A budget that holds the five outlines: each file is folded (and parsed) once.
    policy = Policy(steps=("summary",), keep_recent_messages=4, fold_max_tokens=3_000)
    result = compact_messages(
        history, policy, summarizer=ScriptedSummarizer(default="Summary."), force=True
    )
    assert result.compacted
    assert "<system-reminder>" in message_text(result.messages[1])
    assert len(parses) == len(set(parses)) == 5


def test_known_counts_spare_counting_a_lone_results_source() -> None:
    history = reading_history(rounds=6, files=3)
    counts = [
        count_text_tokens(m["content"][0]["content"]) if i % 4 == 3 else 1
        for i, m in enumerate(history)
    ]
    expected = file_view_outlines(history, Policy())
    with recording_encodes() as encoded:
        assert file_view_outlines(history, Policy(), counts) == expected
    sources = {module_source(i, 40) for i in range(3)}
    assert encoded
    assert not sources & set(encoded)


_REFERENCE_NUMBERED = re.compile(r"^ *(\d{1,9})(?:→|\t)(.*)$")


def _reference_strip(text: str) -> tuple[str, int]:
    """strip_line_numbers as first written: one match per line of str.splitlines."""
    lines = text.splitlines()
    numbered = [m for m in map(_REFERENCE_NUMBERED.match, lines) if m is not None]
    non_blank = sum(1 for line in lines if line.strip())
    if not numbered or len(numbered) * 2 < non_blank:
        return text, 1
    return "\n".join(m.group(2) for m in numbered) + "\n", max(int(numbered[0].group(1)), 1)


@given(
    st.lists(
        st.sampled_from(["1", "42", " ", "\t", "→", "\n", "\r", "\r\n", "x", "\u2028", "  7→a"]),
        max_size=16,
    ).map("".join)
)
def test_strip_line_numbers_matches_a_per_line_reference(text: str) -> None:
    assert strip_line_numbers(text) == _reference_strip(text)


@pytest.mark.parametrize(
    "text",
    [
        "     3→def a():\n     4→    return 1",
        "     3→def a():\n     4→    return 1\n",
        "     3→def a():\n     4→    return 1\n\n",
        "     3→def a():\n\n     5→    return 1\n",
        "     0→x\n     1→y",
    ],
)
def test_every_line_numbered_strips_as_the_reference(text: str) -> None:
    assert strip_line_numbers(text) == _reference_strip(text)
