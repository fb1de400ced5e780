"""The fast retention check finds exactly what its first plain version found (issue 14).

`retention_oracle` is compaction/retention.py as it was before the one-pass rewrite; every
history here, generated with the shapes and characters that the shortcuts reason about (paths
next to URLs, error words on numbered or indented lines, line breaks other than "\\n", TODO
markers, tool inputs, failed calls, summaries), gives the same identifiers in the same order
and the same recall with both.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.histories import project_session, synthetic_session
from compaction import recall, retention
from compaction.messages import make_summary_message
from compaction.retention import extract_identifiers, measure_recall, recall_around
from tests.compaction import retention_oracle as oracle

_PIECES = st.sampled_from(
    [
        "a",
        "src/app/models.py",
        "./README.md",
        "../x.toml",
        "~/notes.txt",
        "/etc/hosts",
        "a/b",
        "and/or",
        "v1.2",
        "os.path",
        "models.py",
        "foo.tar.gz",
        "x(models.py/y",
        "a@b.py/x",
        "app.py/",
        "src.d/models.py",
        "pkg/a.b/c.py",
        "https://example.com/a?b=1.",
        "http://x.org/p/q.py)",
        "(https://ex.com/a.py,",
        "xhttps://no",
        "a.py,https://ex.com/b",
        "/",
        ".",
        "..",
        ",",
        ":",
        "é",
        "ValueError: bad input",
        "KeyError",
        "Error",
        "Exception",
        "MyException",
        "Traceback (most recent call last):",
        "Traceback",
        "FAILED tests/test_a.py::t",
        "failed",
        "unfailed",
        "error: x",
        "terror:",
        "error:failed",
        "ffailed:",
        "error::",
        "Error:",
        "    12→TypeError",
        "3\tRuntimeError",
        "  raise KeyError(x)",
        "except OSError:",
        "# Error",
        "// failed",
        "- [ ] write the parser",
        "* [ ] x",
        "- [x] done",
        "TODO: update docs",
        "TODO:",
        "x" * 230,
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        "\r\n",
        "\r",
        "\x0b",
        "\x1c",
        "\x85",
        "\u2028",
        "\u2003",
        "\u3000",
    ]
)
_TEXTS = st.lists(_PIECES, max_size=24).map("".join)
_NAMES = st.sampled_from(["Read", "Bash", "Edit", "", "  ", "TodoWrite"])
_IDS = st.sampled_from(["t1", "t2", "t3"])


def _inputs() -> st.SearchStrategy[Any]:
    todo = st.fixed_dictionaries(
        {
            "content": st.one_of(_TEXTS, st.integers()),
            "status": st.sampled_from(["pending", "in_progress", "completed", None]),
        }
    )
    leaves = st.one_of(_TEXTS, st.integers(), st.none())
    nested = st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=6,
    )
    return st.one_of(
        st.dictionaries(st.sampled_from(["file_path", "command", "x"]), nested, max_size=3),
        st.fixed_dictionaries({"todos": st.lists(st.one_of(todo, _TEXTS), max_size=4)}),
        nested,
    )


def _blocks() -> st.SearchStrategy[Any]:
    result_content = st.one_of(
        _TEXTS,
        st.none(),
        st.lists(
            st.one_of(
                st.fixed_dictionaries(
                    {"type": st.just("text"), "text": st.one_of(_TEXTS, st.none())}
                ),
                st.just({"type": "image", "source": {}}),
                _TEXTS,
            ),
            max_size=3,
        ),
    )
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(_TEXTS, st.none())}),
        st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _TEXTS}),
        st.fixed_dictionaries(
            {"type": st.just("tool_use"), "id": _IDS, "name": _NAMES, "input": _inputs()}
        ),
        st.fixed_dictionaries(
            {"type": st.just("tool_result"), "tool_use_id": _IDS, "content": result_content},
            optional={"is_error": st.booleans()},
        ),
        _TEXTS,  # not a block: skipped
    )


def _messages() -> st.SearchStrategy[dict[str, Any]]:
    plain = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "tool"]),
            "content": st.one_of(_TEXTS, st.lists(_blocks(), max_size=4), st.none()),
        },
        optional={"is_meta": st.booleans()},
    )
    summary = _TEXTS.map(lambda text: make_summary_message(text, level=1))
    return st.one_of(plain, plain, plain, summary)


_HISTORIES = st.lists(_messages(), max_size=8)


@settings(max_examples=600, deadline=None)
@given(_HISTORIES)
def test_the_same_identifiers_in_the_same_order(history: list[dict[str, Any]]) -> None:
    assert extract_identifiers(history) == oracle.extract_identifiers(history)


@settings(max_examples=200, deadline=None)
@given(_HISTORIES)
def test_the_same_identifiers_when_the_words_met_are_forgotten(
    history: list[dict[str, Any]],
) -> None:
    # The words a walk remembers are a cache: forgetting them at every text changes nothing.
    with patch.object(retention, "_REMEMBERED_WORDS", 0):
        assert extract_identifiers(history) == oracle.extract_identifiers(history)


@settings(max_examples=300, deadline=None)
@given(_HISTORIES)
def test_the_same_identifiers_when_every_result_is_remembered_or_forgotten(
    history: list[dict[str, Any]],
) -> None:
    # A walk searches a long result met before no more (its error lines are found already):
    # remembering every result, short ones too, or forgetting them at every one changes
    # nothing.
    with patch.object(retention, "_REPEAT_MIN", 0):
        assert extract_identifiers(history) == oracle.extract_identifiers(history)
        with patch.object(retention, "_REMEMBERED_RESULTS", 0):
            assert extract_identifiers(history) == oracle.extract_identifiers(history)


def test_a_result_met_again_still_names_its_failed_call() -> None:
    log = "\n".join([f"line {n}" for n in range(200)] + ["ValueError: bad input"])
    history = [
        {"role": "user", "content": "Run the tests"},
        _call("t1", "Bash"),
        _result("t1", log, failed=False),
        _call("t2", "Pytest"),
        _result("t2", log, failed=True),
    ]
    assert len(log) >= retention._REPEAT_MIN
    identifiers = extract_identifiers(history)
    assert identifiers == oracle.extract_identifiers(history)
    assert identifiers == ["Run the tests", "ValueError: bad input", "Pytest"]


def _call(tool_id: str, name: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
    return {"role": "assistant", "content": [block]}


def _result(tool_id: str, text: str, *, failed: bool) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": failed}
    return {"role": "user", "content": [block]}


@settings(max_examples=400, deadline=None)
@given(_HISTORIES, _HISTORIES, st.lists(_TEXTS, max_size=6))
def test_the_same_recall(
    history: list[dict[str, Any]], compacted: list[dict[str, Any]], others: list[str]
) -> None:
    # Identifiers of a history against another one, and arbitrary strings.
    identifiers = oracle.extract_identifiers(history) + others
    assert measure_recall(identifiers, compacted) == oracle.measure_recall(identifiers, compacted)
    assert measure_recall(identifiers, history) == oracle.measure_recall(identifiers, history)


@pytest.mark.parametrize("make", [synthetic_session, project_session])
def test_the_same_on_the_benchmark_histories(make: Any) -> None:
    history = make(400, 80_000)
    identifiers = extract_identifiers(history)
    assert identifiers == oracle.extract_identifiers(history)
    assert len(identifiers) > 100
    kept = history[:3] + history[-60:]
    recall = measure_recall(identifiers, kept)
    assert recall == oracle.measure_recall(identifiers, kept)
    assert 0 < recall[0] < 1


@settings(max_examples=200, deadline=None)
@given(_HISTORIES, _HISTORIES, st.lists(_TEXTS, max_size=6))
def test_the_same_recall_when_every_triple_of_words_shares_a_hash(
    history: list[dict[str, Any]], compacted: list[dict[str, Any]], others: list[str]
) -> None:
    # Triples of words are kept as hashes: a hash the text has rules nothing out.
    identifiers = oracle.extract_identifiers(history) + others
    with (
        patch.object(recall, "_triple", lambda first, second, third: 0),
        patch.object(recall, "_triples", lambda words: {0} if len(words) > 2 else set()),
    ):
        assert measure_recall(identifiers, compacted) == oracle.measure_recall(
            identifiers, compacted
        )


def test_recall_of_the_same_identifiers_in_several_histories() -> None:
    history = synthetic_session(200, 40_000)
    identifiers = extract_identifiers(history)
    for kept in (history[:3] + history[-40:], history[:3] + history[-80:], history):
        assert measure_recall(identifiers, kept) == oracle.measure_recall(identifiers, kept)


def _summaries(fixed: str) -> st.SearchStrategy[dict[str, Any]]:
    """Summary messages that end with `fixed` after a line break (as a summary ends with
    its outlines), or not, and other messages."""
    ending = _TEXTS.map(lambda text: make_summary_message(f"{text}\n{fixed}", level=1))
    blocks = st.tuples(_TEXTS, _TEXTS).map(
        lambda texts: {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"{texts[0]}\n{fixed}"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": texts[1]}},
            ],
        }
    )
    return st.one_of(ending, ending, blocks, _TEXTS.map(make_summary_message), _messages())


@settings(max_examples=300, deadline=None)
@given(_HISTORIES, _HISTORIES, _HISTORIES, st.lists(_TEXTS, max_size=6), st.data())
def test_recall_around_summaries_is_the_recall_of_the_whole_history(
    middle: list[dict[str, Any]],
    head: list[dict[str, Any]],
    tail: list[dict[str, Any]],
    others: list[str],
    data: st.DataObject,
) -> None:
    # Head and tail measured once, then each summary; `fixed` holds some identifiers, and
    # some identifiers are pieces of it (line breaks included).
    identifiers = oracle.extract_identifiers(middle) + others
    fixed = data.draw(_TEXTS) + "\n".join(identifiers[::2]) + data.draw(_TEXTS)
    start = data.draw(st.integers(0, len(fixed)))
    identifiers.append(fixed[start : data.draw(st.integers(start, len(fixed)))])
    measure = recall_around(identifiers, head, tail, fixed)
    for _ in range(2):
        summary = data.draw(_summaries(fixed))
        expected = oracle.measure_recall(identifiers, [*head, summary, *tail])
        assert measure(summary) == expected


@pytest.mark.parametrize("make", [synthetic_session, project_session])
def test_recall_around_on_the_benchmark_histories(make: Any) -> None:
    history = make(400, 80_000)
    middle, tail = history[3:-60], history[-60:]
    identifiers = extract_identifiers(middle)
    result = next(m for m in middle[40:] if m["content"][0].get("type") == "tool_result")
    outlines = "\n".join(result["content"][0]["content"].splitlines()[:5])  # some of its lines
    measure = recall_around(identifiers, history[:3], tail, outlines)
    for kept in (middle[-40:], middle[:5]):
        text = "\n".join(oracle.extract_identifiers(kept)[:40])
        summary = make_summary_message(f"{text}\n\n{outlines}")
        expected = oracle.measure_recall(identifiers, [*history[:3], summary, *tail])
        assert 0 < expected[0] < 1
        assert measure(summary) == expected


def test_recall_around_searches_the_identifiers_with_a_line_break_in_the_whole_text() -> None:
    # Without the outlines the summary's two texts (its text, a tool's name) read "a\nb":
    # not the history's text.
    summary = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "a\noutline"},
            {"type": "tool_use", "id": "t1", "name": "b", "input": {}},
        ],
    }
    identifiers = ["a\nb", "a\noutline\nb", "outline", "a"]
    measure = recall_around(identifiers, [], [], "outline")
    assert measure(summary) == oracle.measure_recall(identifiers, [summary]) == (0.75, ["a\nb"])
