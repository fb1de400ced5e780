"""The faster smart truncation gives what the reference one gives (tests/support/
smart_truncate_reference.py, the code of 9b6c383): same messages (equal, and the same
objects where the reference keeps an input message), same counts, same detail."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import block_counts
from compaction.folding import outline
from compaction.policy import Policy
from compaction.results import TruncateResult
from compaction.smart_truncate import smart_truncate
from compaction.tokens import count_text_tokens, message_token_counts
from tests.support import smart_truncate_reference as reference
from tests.support.histories import histories

CI = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_same(history: list[dict[str, Any]], policy: Policy) -> TruncateResult:
    outline.clear_outline_cache()
    expected = reference.smart_truncate(history, policy)
    outline.clear_outline_cache()
    got = smart_truncate(history, policy)
    assert got.messages == expected.messages
    originals = {id(message): index for index, message in enumerate(history)}
    assert [originals.get(id(m)) for m in got.messages] == [
        originals.get(id(m)) for m in expected.messages
    ]
    assert (got.truncated, got.tokens_before, got.tokens_after, got.removed_message_count) == (
        expected.truncated,
        expected.tokens_before,
        expected.tokens_after,
        expected.removed_message_count,
    )
    detail, before = dict(got.detail), dict(expected.detail)
    if not detail.pop("deleted_whole_middle"):
        assert detail == before
        return got
    # Every deletable middle message went whatever its views fold to, so those views were
    # not folded: the rest of the detail is the same.
    unfolded = ("batch_size", "tokens_after_filter", "folded_results", "folded_paths")
    assert {k: v for k, v in detail.items() if k not in unfolded} == {
        k: v for k, v in before.items() if k not in unfolded
    }
    assert detail["batch_size"] >= detail["deleted_messages"]
    assert detail["tokens_after_filter"] >= before["tokens_after_filter"]
    assert not Counter(detail["folded_paths"]) - Counter(before["folded_paths"])
    return got


# Agent sessions with file views of code -----------------------------------------------------

_PYTHON = "".join(
    f"class Model{i}:\n    def save(self):\n        return {i}\n\n\ndef helper_{i}(x):\n"
    f"    return x + {i}\n\n\n"
    for i in range(12)
)
_JS = "".join(f"export function f{i}(a) {{\n  return a * {i};\n}}\n\n" for i in range(15))
_MARKDOWN = "# Title\n\nSome prose.\n\n## Usage\n\nRun it.\n\n## Notes\n\nNone.\n"
_PROSE = "just some words without any code marks\nand a second line\n"
_FILES = [
    ("src/models.py", _PYTHON),
    ("src/models.py", _PYTHON.replace("Model", "Record")),  # same path, other content
    ("web/app.js", _JS),
    ("README.md", _MARKDOWN),
    ("notes.txt", _PROSE),
    ("empty.py", "\n\n"),
    ("src/other.py", _PYTHON[:400]),
]
_VIEW_TOOLS = ("Read", "read_file", "str_replace_based_edit_tool")


def _numbered(source: str, start: int, style: int) -> str:
    lines = source.splitlines()[start - 1 :]
    if style == 0:
        return "\n".join(f"{n:6}→{line}" for n, line in enumerate(lines, start=start))
    if style == 1:
        return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, start=start)) + "\n"
    return "\n".join(lines)  # not numbered


_words = st.sampled_from(
    [
        "fix the parser",
        "run the tests",
        "all green",
        "see <command-name>/review</command-name>",
        "<command args='x'>go</command>",
        "ok",
        "the build failed with a long trace " * 20,
    ]
)


@st.composite
def _step(draw: st.DrawFn, ids: Iterator[int]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    if draw(st.booleans()):
        calls.append({"type": "text", "text": draw(_words)})
    for _ in range(draw(st.integers(1, 3))):
        tool_id = f"toolu_{next(ids)}"
        kind = draw(st.integers(0, 4))
        path, source = draw(st.sampled_from(_FILES))
        start = draw(st.sampled_from([1, 1, 1, 3]))
        output = _numbered(source, start, draw(st.integers(0, 2)))
        if kind == 0:
            call = {"name": "Read", "input": {"file_path": path}}
        elif kind == 1:
            tool = draw(st.sampled_from(_VIEW_TOOLS[1:]))
            command = draw(st.sampled_from(["view", "str_replace"]))
            call = {"name": tool, "input": {"command": command, "path": path}}
        elif kind == 2:
            call = {"name": "Bash", "input": {"command": "pytest"}}
            output = draw(_words)
        else:
            call = {"name": "Grep", "input": {"pattern": "def"}}
            output = draw(_words)
        calls.append({"type": "tool_use", "id": tool_id, **call})
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id}
        result["content"] = output if draw(st.booleans()) else [{"type": "text", "text": output}]
        if draw(st.integers(0, 6)) == 0:
            result["is_error"] = True
        results.append(result)
    if draw(st.integers(0, 4)) == 0:
        results.append({"type": "text", "text": draw(_words)})
    return [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = itertools.count(1)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."} for _ in range(draw(st.integers(0, 2)))
    ]
    for _ in range(draw(st.integers(1, 14))):
        messages.append({"role": "user", "content": draw(_words)})
        if draw(st.integers(0, 8)) == 0:
            messages.append({"role": "system", "content": "A reminder mid-conversation."})
        for _ in range(draw(st.integers(0, 3))):
            messages.extend(draw(_step(ids)))
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": draw(_words)})
    return messages


policies = st.builds(
    Policy,
    smart_truncate_max_tokens=st.integers(1, 6000),
    safety_factor=st.sampled_from([1.0, 1.5]),
    fold_max_tokens=st.sampled_from([10_000, 40]),
)


@CI
@given(sessions(), policies)
def test_agent_sessions_truncate_as_before(history: list[dict[str, Any]], policy: Policy) -> None:
    assert_same(history, policy)


@CI
@given(histories(max_rounds=10), policies)
def test_generated_histories_truncate_as_before(
    history: list[dict[str, Any]], policy: Policy
) -> None:
    assert_same(history, policy)


@pytest.mark.parametrize("target", [30_000, 400_000])
def test_the_benchmark_session_truncates_as_before(target: int) -> None:
    from bench.truncate import session

    result = assert_same(session(target), Policy.preset("smart-truncation"))
    assert result.detail["folded_results"] > 0
    assert result.detail["deleted_messages"] > 0 or target < 100_000
    assert result.detail["deleted_whole_middle"] == (target > 100_000)


@CI
@given(sessions(), policies)
def test_given_counts_give_the_same_result(history: list[dict[str, Any]], policy: Policy) -> None:
    expected = smart_truncate(history, policy)
    got = smart_truncate(history, policy, token_counts=message_token_counts(history))
    assert got.messages == expected.messages
    originals = {id(message): index for index, message in enumerate(history)}
    assert [originals.get(id(m)) for m in got.messages] == [
        originals.get(id(m)) for m in expected.messages
    ]
    assert (got.tokens_before, got.tokens_after, got.detail) == (
        expected.tokens_before,
        expected.tokens_after,
        expected.detail,
    )


def test_given_counts_only_new_text_is_encoded() -> None:
    from bench.truncate import session

    history = session(120_000)
    policy = Policy.preset("smart-truncation")
    counts = message_token_counts(history)
    encoded: list[str] = []
    real = count_text_tokens

    def spy(text: str, encoding: str | None = None) -> int:
        encoded.append(text)
        return real(text, encoding)

    with mock.patch.object(block_counts, "count_text_tokens", spy):
        result = smart_truncate(history, policy, token_counts=counts)
    assert result.detail["folded_results"] > 0
    assert len(encoded) == len(set(encoded)) > 0  # each outline once
    assert all(text.startswith("<system-reminder>") for text in encoded)


def test_counts_must_match_the_messages() -> None:
    with pytest.raises(ValueError, match="one count per message"):
        smart_truncate([{"role": "user", "content": "hi"}], token_counts=[1, 2])
