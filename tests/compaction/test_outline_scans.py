"""The fast scans of the regex outlines (`folding.outline`) give what the plain ones give."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.folding import outline

_PIECES = st.sampled_from(
    [
        "def ",
        "class ",
        "async ",
        "export ",
        "fn",
        "name",
        "x",
        ":",
        "(",
        "=",
        " ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "\x0b",
        "\u2028",
        "# ",
        "é",
    ]
)
_TEXTS = st.lists(_PIECES, max_size=120).map("".join)


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_definitions_are_the_definition_pattern_matches(text: str) -> None:
    found = [(m.start("indent"), m.group("keyword", "name")) for m in outline._definitions(text)]
    expected = [(m.start(), m.group("keyword", "name")) for m in outline._DEFINITION.finditer(text)]
    assert found == expected


@settings(max_examples=400, deadline=None)
@given(_TEXTS, st.sampled_from([1, 2, 5, 64]))
def test_first_lines_are_the_split_lines(text: str, head: int) -> None:
    # Small heads: the text is split in several rounds.
    assert list(outline._first_lines(text, head)) == text.splitlines()


@given(_TEXTS)
def test_code_marks_are_the_character_class(text: str) -> None:
    assert outline._may_be_code(text) == (re.search(r"[(){}\[\];=]", text) is not None)
