"""File views: which tool calls show a file, and the source inside their results."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.file_views import (
    file_view_path,
    file_view_sources,
    result_text,
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


def test_result_text_joins_text_blocks() -> None:
    content = [
        {"type": "text", "text": "a"},
        {"type": "image", "source": {}},
        {"type": "text", "text": "b"},
    ]
    assert result_text(content) == "a\nb"
    assert result_text("s") == "s"
    assert result_text(None) == ""


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
