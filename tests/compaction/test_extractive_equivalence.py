"""The faster extractive summarizer gives what the reference one gives (tests/support/
extractive_reference.py and summary_fit_reference.py, the code of 5f842ca): the same summary
of the same request, and `fit` and `dedupe` the same text and lines for any lines."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.marked_words import words_remembered
from compaction.messages import Message, first_nonblank_line, make_summary_message
from compaction.summarizers import ExtractiveSummarizer, SummaryRequest, extractive
from compaction.summarizers.prompt import SECTIONS
from compaction.summarizers.summary_fit import KEY_IDENTIFIERS, Line, dedupe, fit
from tests.support import extractive_reference, summary_fit_reference
from tests.support.histories import histories, synthetic_history

CI = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Words that make lines: paths (with edge punctuation), URLs, error names, todo words,
# several kinds of whitespace and line breaks, non-ASCII text.
_WORDS = (
    "fix",
    "the",
    "src/app.py",
    "(src/app.py),",
    "README.md.",
    "tests/test_app.py:",
    "./run.sh",
    "~/notes.txt",
    "a.b",
    "x/y",
    "https://example.com/a/b.html",
    "ValueError:",
    "ValueError",
    "error:",
    "Traceback (most recent call last):",
    "  File x",
    "pkg.CustomException: boom",
    "TODO:",
    "todo",
    "FIXME",
    "next step",
    "Still need",
    "remaining",
    "done.",
    "naïve",
    "été.py",
    "\n",
    "\n\n",
    "\r\n",
    "\t",
    "\x1c",
    "\u2028",
    "\xa0",
    "  ",
    "MultiEdit",
)
_text = st.lists(st.sampled_from(_WORDS), max_size=25).map(" ".join)
# Tool output: lines, some naming an error (only the last of those is the error line).
_LINES = (
    "Traceback (most recent call last):",
    "ValueError: bad input in src/app.py",
    "  KeyError: 'k'",
    "pkg.CustomException",
    "error: not found",
    "xErrorx y",
    "the run ValueError: x",
    "plain words",
    "",
    "   ",
)
_output = st.one_of(
    _text,
    st.tuples(
        st.lists(st.sampled_from(_LINES), max_size=8),
        st.sampled_from(("\n", "\r\n", "\r", "\x1c", "\u2028")),
    ).map(lambda lines_and_break: lines_and_break[1].join(lines_and_break[0])),
)
_NAMES = ("Read", "Edit", "Bash", "Grep", "Write", "TodoWrite", "rm", "mcp_tool")


@st.composite
def _tool_input(draw: st.DrawFn) -> Any:
    keys = st.sampled_from(("file_path", "path", "paths", "command", "query", "todos", "x"))
    tool_input: dict[str, Any] = {}
    for key in draw(st.lists(keys, max_size=3)):
        if key == "paths":
            tool_input[key] = draw(st.lists(st.one_of(_text, st.integers()), max_size=3))
        elif key == "todos":
            status = st.sampled_from(("pending", "in_progress", "completed"))
            item = st.fixed_dictionaries({"content": _text, "status": status})
            tool_input[key] = draw(st.lists(item, max_size=3))
        elif key == "command":
            verb = draw(st.sampled_from(("cat", "sed -i", "rm", "pytest", "", "  ")))
            tool_input[key] = f"{verb} {draw(_text)}"
        else:
            tool_input[key] = draw(_text)
    return tool_input if draw(st.integers(0, 9)) else draw(st.sampled_from((None, "text", [1])))


@st.composite
def _step(draw: st.DrawFn, ids: Iterator[int]) -> list[Message]:
    """An assistant turn of text and calls, then the user turn of their results."""
    calls: list[Any] = []
    if draw(st.booleans()):
        calls.append({"type": "text", "text": draw(_text)})
    call_ids = [f"t{next(ids) % 7}" for _ in range(draw(st.integers(0, 3)))]  # ids repeat
    for call_id in call_ids:
        name = draw(st.sampled_from(_NAMES))
        calls.append(
            {"type": "tool_use", "id": call_id, "name": name, "input": draw(_tool_input())}
        )
    results: list[Any] = []
    for call_id in call_ids + (["stray"] if draw(st.integers(0, 5)) == 0 else []):
        text = draw(_output)
        content: Any = text if draw(st.booleans()) else [{"type": "text", "text": text}, "x"]
        result = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        if draw(st.integers(0, 3)) == 0:
            result["is_error"] = True
        results.append(result)
    if draw(st.integers(0, 4)) == 0:
        results.append({"type": "text", "text": draw(_text)})
    return [{"role": "assistant", "content": calls}, {"role": "user", "content": results or "."}]


@st.composite
def _messages(draw: st.DrawFn) -> list[Message]:
    ids = itertools.count()
    messages: list[Message] = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            messages.append({"role": "system", "content": draw(_text)})
        elif kind == 1:
            messages.append({"role": "user", "content": draw(_text), "is_meta": True})
        elif kind == 2:
            messages.append(make_summary_message(_reference_summary(draw(_messages()), 400)))
        else:
            messages.append({"role": "user", "content": draw(_text)})
            messages.extend(itertools.chain.from_iterable(draw(_step(ids)) for _ in range(2)))
            if draw(st.booleans()):
                messages.append({"role": "assistant", "content": draw(_text)})
    return messages


def _reference_summary(messages: list[Message], max_tokens: int) -> str:
    request = SummaryRequest(messages, max_tokens=max_tokens)
    return extractive_reference.ExtractiveSummarizer().summarize(request)


def assert_same(request: SummaryRequest, line_chars: int = 300) -> str:
    expected = extractive_reference.ExtractiveSummarizer(line_chars=line_chars).summarize(request)
    got = ExtractiveSummarizer(line_chars=line_chars).summarize(request)
    assert got == expected
    with words_remembered():  # the marked words remembered give the same summary
        assert ExtractiveSummarizer(line_chars=line_chars).summarize(request) == expected
        assert ExtractiveSummarizer(line_chars=line_chars).summarize(request) == expected
    return got


@CI
@given(
    _messages(),
    st.integers(60, 2000),
    st.lists(st.sampled_from(_WORDS), max_size=40),
    st.integers(20, 400),
)
def test_summaries_are_the_reference_ones(
    messages: list[Message], max_tokens: int, identifiers: list[str], line_chars: int
) -> None:
    request = SummaryRequest(
        messages, max_tokens=max_tokens, required_identifiers=tuple(identifiers)
    )
    assert_same(request, line_chars)


@CI
@given(histories(), st.integers(100, 1500))
def test_summaries_of_agent_histories_are_the_reference_ones(
    messages: list[Message], max_tokens: int
) -> None:
    assert_same(SummaryRequest(messages, max_tokens=max_tokens))


def test_a_long_session_with_many_identifiers_is_summarized_as_before() -> None:
    messages = synthetic_history(600, seed=3)
    identifiers = [f"src/module_{i}.py" for i in range(3000)]
    for max_tokens in (300, 1000, 4000):
        request = SummaryRequest(
            messages, max_tokens=max_tokens, required_identifiers=tuple(identifiers)
        )
        assert "Key identifiers:" in assert_same(request)


def test_a_failure_is_told_by_its_last_error_line() -> None:
    output = "Traceback (most recent call last):\n  KeyError: 'k'\nplain\nValueError: bad\nend"
    messages: list[Message] = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": output}],
        },
    ]
    summary = assert_same(SummaryRequest(messages, max_tokens=500))
    assert "- Bash failed: ValueError: bad" in summary


_sections = st.sampled_from((*SECTIONS, KEY_IDENTIFIERS, "Other"))
_order = st.one_of(st.integers(-2, 30), st.floats(-2, 30, allow_nan=False))
_line = st.builds(
    Line,
    _sections,
    st.one_of(_text, st.sampled_from(("- a", "- b", "- src/app.py: read"))),
    st.integers(0, 6),
    _order,
    st.one_of(st.none(), st.sampled_from(("src/app.py", "README.md", "a/b/c.py", ""))),
)


# Identifiers, with a run of long ones that can make `fit` give up on the next (the first)
# before it considers them again among the others.
_identifiers = st.builds(
    lambda first, long, last: first + ["src/" + "long_name/" * 30] * long + last,
    st.lists(st.sampled_from(_WORDS), max_size=60),
    st.sampled_from((0, 0, 10, 55)),
    st.lists(st.sampled_from(_WORDS), max_size=20),
)


@CI
@given(
    st.lists(_line, max_size=80),
    st.integers(0, 1500),
    st.dictionaries(_sections, st.integers(0, 5), max_size=3),
    _identifiers,
)
def test_fit_renders_the_reference_text(
    lines: list[Line], max_tokens: int, dropped: dict[str, int], identifiers: list[str]
) -> None:
    listed = [
        summary_fit_reference.Line(KEY_IDENTIFIERS, f"- {identifier}", 0, position)
        for position, identifier in enumerate(identifiers)
    ]
    same = listed + [summary_fit_reference.Line(*line) for line in lines]
    expected = summary_fit_reference.fit(same, max_tokens, None, dropped)
    assert fit(lines, max_tokens, None, dropped, required=identifiers) == expected


@CI
@given(st.lists(_line, min_size=1, max_size=30).flatmap(lambda ls: st.lists(st.sampled_from(ls))))
def test_dedupe_keeps_the_reference_lines(lines: list[Line]) -> None:
    same = [summary_fit_reference.Line(*line) for line in lines]
    assert list(map(tuple, dedupe(lines))) == list(map(tuple, summary_fit_reference.dedupe(same)))


_spaced = st.one_of(
    st.text(),
    st.lists(
        st.sampled_from(("a", "b.py", " ", "  ", "\n", "\r", "\t", "\x1c", "\x1f", "\x85"))
    ).map("".join),
    st.lists(st.sampled_from(("\xa0", "\u2028", "\u3000", "\x00", "é", "x", " "))).map("".join),
)


@given(_spaced)
def test_the_quick_first_line_is_the_first_nonblank_line(text: str) -> None:
    assert extractive._first_line(text) == first_nonblank_line(text)
    assert extractive._first_line(f"x{text}") == first_nonblank_line(f"x{text}")


@given(_spaced, st.integers(10, 120), st.sampled_from((1.0, 0.7, 0.4)))
def test_clips_are_the_reference_ones(text: str, line_chars: int, share: float) -> None:
    for clipped in (text, f"a {text}", text * 9):
        if extractive._single_spaced(clipped):  # kept as it is
            assert " ".join(clipped.split()) == clipped
        expected = extractive_reference._Collector(line_chars).clip(clipped, share)
        assert extractive._Collector(line_chars).clip(clipped, share) == expected
