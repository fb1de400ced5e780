"""The retention check: identifiers a history mentions and how many survive."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import recall, retention
from compaction.retention import extract_identifiers, measure_recall
from tests.support.histories import assistant, histories, user


def call(tool_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": arguments}],
    }


def result(tool_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def test_first_line_of_each_real_user_request() -> None:
    messages = [
        user("\n  Fix the login bug  \nmore detail"),
        user("<system-reminder>meta</system-reminder>", is_meta=True),
        assistant("ok"),
        user("Now add tests"),
    ]
    ids = extract_identifiers(messages)
    assert "Fix the login bug" in ids
    assert "Now add tests" in ids
    assert "<system-reminder>meta</system-reminder>" not in ids


def test_paths_and_urls_from_text_and_tool_inputs() -> None:
    messages = [
        user("Look at src/app/models.py and ./README.md, see https://example.com/a?b=1."),
        call("t1", "Read", file_path="/repo/settings.toml"),
        result("t1", "ok"),
        assistant("Edited config.yaml and docs/guide/intro.md"),
    ]
    ids = extract_identifiers(messages)
    for expected in (
        "src/app/models.py",
        "./README.md",
        "https://example.com/a?b=1",
        "/repo/settings.toml",
        "config.yaml",
        "docs/guide/intro.md",
    ):
        assert expected in ids


def test_words_that_only_look_like_paths_are_not_paths() -> None:
    ids = extract_identifiers([user("use and/or, e.g. os.path, ratio 1/6, version v1.2")])
    assert ids == ["use and/or, e.g. os.path, ratio 1/6, version v1.2"]


def test_paths_in_tool_output_are_not_collected() -> None:
    messages = [call("t1", "Bash", command="ls"), result("t1", "a/b/c.py\nd/e/f.py")]
    assert extract_identifiers(messages) == []


def test_failed_tool_names_and_error_lines() -> None:
    messages = [
        call("t1", "Bash", command="pytest"),
        result(
            "t1",
            "Traceback (most recent call last):\n"
            '  File "app.py", line 3, in <module>\n'
            '    raise ValueError("bad")\n'
            "ValueError: bad input\n"
            "FAILED tests/test_app.py::test_login - AssertionError",
            is_error=True,
        ),
        call("t2", "Read", file_path="ok.py"),
        result("t2", "fine"),
    ]
    ids = extract_identifiers(messages)
    assert "Bash" in ids
    assert "Read" not in ids
    assert "ValueError: bad input" in ids
    assert "FAILED tests/test_app.py::test_login - AssertionError" in ids
    assert "Traceback (most recent call last):" not in ids
    assert 'raise ValueError("bad")' not in ids


def test_code_lines_of_a_file_view_are_not_errors() -> None:
    messages = [
        call("t1", "Read", file_path="a.py"),
        result("t1", "     1→class ParseError(Exception):\n     2→    pass"),
    ]
    assert extract_identifiers(messages) == ["a.py"]


def test_error_lines_are_trimmed_and_capped_per_block() -> None:
    long_line = "RuntimeError: " + "x" * 500
    lines = "\n".join([long_line] + [f"KeyError: k{n}" for n in range(10)])
    ids = extract_identifiers([call("t", "Bash"), result("t", lines)])
    assert ids == [long_line[:200], "KeyError: k0", "KeyError: k1"]


def test_open_todo_items() -> None:
    messages = [
        user("Plan:\n- [ ] write the parser\n- [x] done thing\nTODO: update docs"),
        call(
            "t1",
            "TodoWrite",
            todos=[
                {"content": "run migrations", "status": "pending"},
                {"content": "ship it", "status": "completed"},
                {"content": "review PR", "status": "in_progress"},
            ],
        ),
        result("t1", "ok"),
    ]
    ids = extract_identifiers(messages)
    assert "- [ ] write the parser" in ids
    assert "TODO: update docs" in ids
    assert "run migrations" in ids
    assert "review PR" in ids
    assert "ship it" not in ids
    assert not any("done thing" in i for i in ids)


def test_identifiers_are_deduplicated_in_order_of_appearance() -> None:
    messages = [
        user("edit b.py then a.py"),
        assistant("a.py done, b.py next"),
        user("and c.py"),
    ]
    ids = extract_identifiers(messages)
    assert ids == ["edit b.py then a.py", "b.py", "a.py", "and c.py", "c.py"]


def test_recall_counts_identifiers_present_verbatim() -> None:
    ids = ["src/a.py", "ValueError: bad", "Bash", "gone.py"]
    compacted = [
        user("Summary: edited src/a.py; ValueError: bad was fixed"),
        call("t1", "Bash", command="ls"),
        result("t1", "ok"),
    ]
    recall, missing = measure_recall(ids, compacted)
    assert recall == 0.75
    assert missing == ["gone.py"]


def test_recall_searches_tool_inputs_and_results() -> None:
    compacted = [call("t1", "Edit", file_path="deep/x.py"), result("t1", "wrote y.py")]
    assert measure_recall(["deep/x.py", "y.py"], compacted) == (1.0, [])


def test_recall_finds_a_path_inside_a_long_word_without_listing_its_suffixes() -> None:
    # A base64 blob or a minified line: its suffixes would take the square of its length.
    blob = "A" * 5000 + "/src/app.py/" + "B" * 5000
    compacted = [user(f"data:{blob} end"), assistant("see a/b.py")]
    assert measure_recall(["src/app.py", "a/b.py", "src/app.pyc"], compacted) == (
        2 / 3,
        ["src/app.pyc"],
    )
    words = recall._Words(f"data:{blob} a/b.py")
    assert words.holds("src/app.py")
    assert max(map(len, words.suffixes)) == len("a/b.py")


def test_recall_of_no_identifiers_is_one() -> None:
    assert measure_recall([], []) == (1.0, [])


@settings(max_examples=30, deadline=None)
@given(history=histories(max_rounds=6))
def test_a_history_recalls_all_of_its_own_identifiers(history: list[dict[str, Any]]) -> None:
    ids = extract_identifiers(history)
    assert len(ids) == len(set(ids))
    assert measure_recall(ids, history) == (1.0, [])


# The fast paths must find exactly what the plain definitions find (issue 14) -------------

_PIECES = st.sampled_from(
    [
        "a",
        "src",
        "app.py",
        "/",
        ".",
        "..",
        "~",
        "-",
        "_",
        "@",
        ":",
        ",",
        "x1",
        "README.md",
        "https://",
        "http://ex.com/p",
        "foo.tar.gz",
        "é",
        "\u2003",
        " ",
        "  ",
        "\n",
        "\t",
        "\x1c",
    ]
)
_TEXTS = st.lists(_PIECES, max_size=30).map("".join)


def reference_references(text: str) -> list[str]:
    """`_references` as first written: every pattern over the whole text."""
    found = [m.group().rstrip(".,;:!?") for m in retention._URL.finditer(text)]
    rest = retention._URL.sub(" ", text)
    for match in retention._PATH.finditer(rest):
        path = match.group().rstrip(".,;:!?")
        if path.startswith(("/", "./", "../", "~/")) or retention._EXTENSION.search(path):
            found.append(path)
    found.extend(m.group() for m in retention._BARE_FILE.finditer(rest))
    return found


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_references_match_the_patterns_over_the_whole_text(text):
    # Same identifiers, first occurrences in the same order (repeats are dropped anyway):
    # word by word, the text's words given once each or with their repeats.
    found = list(dict.fromkeys(retention._references(text.split())))
    assert found == list(dict.fromkeys(retention._references(list(dict.fromkeys(text.split())))))
    assert found == list(dict.fromkeys(reference_references(text)))


@settings(max_examples=400, deadline=None)
@given(_TEXTS, st.data())
def test_the_word_index_agrees_with_a_substring_search(text, data):
    words = recall._Words(text)
    if text:
        start = data.draw(st.integers(0, len(text) - 1))
        end = data.draw(st.integers(start, len(text)))
        inside = text[start:end]
        assert words.holds(inside)
    other = data.draw(_TEXTS)
    assert words.holds(other) == (other in text)


_ERROR_PIECES = st.sampled_from(
    [
        "ValueError",
        "  raise KeyError(x)",
        "Traceback (most recent call last):",
        "FAILED",
        "failed",
        "error: x",
        "    12→TypeError",
        "# Error",
        "ok",
        "a",
        " ",
        "\n",
        "\r\n",
        "\x1c",
        "\u2028",
        "\u3000",
        "BadError",
        "- [ ] todo",
        "TODO: y",
        "x" * 250,
    ]
)


def reference_error_lines(text: str) -> list[str]:
    """`_error_lines` as first written: every line tested."""
    found: list[str] = []
    for line in text.splitlines():
        if len(found) == 3:
            break
        stripped = line.strip()
        if stripped == retention._GENERIC_TRACEBACK or retention._NOT_ERROR.match(line):
            continue
        if retention._ERROR.search(stripped):
            found.append(stripped[:200])
    return found


@settings(max_examples=400, deadline=None)
@given(st.lists(_ERROR_PIECES, max_size=25).map("".join))
def test_error_and_todo_shortcuts_find_the_same_lines(text):
    todos = [m.group().strip()[:200] for m in retention._TODO.finditer(text)]
    assert list(retention._error_lines(text)) == reference_error_lines(text)
    assert list(retention._todos(text)) == todos
