"""The page filters: percentages, signed changes and counted nouns say exactly the truth."""

from __future__ import annotations

from typing import Any

import pytest
from django.template import Context, Template

from sessions_app.templatetags.ctxweb_ui import change, counted, percent

MINUS = "\u2212"


@pytest.mark.parametrize(
    ("value", "digits", "shown"),
    [
        (0.8123, 0, "81%"),
        (0.07812, 1, "7.8%"),
        (0, 0, "0%"),
        (-0.001, 0, "0%"),  # never "-0%"
        (-0.25, 0, f"{MINUS}25%"),
        (None, 0, ""),
        ("x", 0, ""),
    ],
)
def test_percent(value: Any, digits: int, shown: str) -> None:
    assert percent(value, digits) == shown


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [
        (1000, 660, f"{MINUS}34%"),
        (100, 218, "+118%"),  # growth is a plus, never "(-0%)"
        (500, 500, "\u00b10%"),
        (1000, 999, f"{MINUS}0.1%"),  # a saving under 0.5% is not "-0%"
        (100000, 99999, f"{MINUS}0.1%"),
        (1000, 1004, "+0.4%"),
        (1000, 0, f"{MINUS}100%"),
        (0, 10, ""),
        (None, 10, ""),
        (10, "x", ""),
    ],
)
def test_change(before: Any, after: Any, shown: str) -> None:
    assert change(before, after) == shown


@pytest.mark.parametrize(
    ("count", "noun", "shown"),
    [
        (1, "message", "1 message"),
        (0, "message", "0 messages"),
        (2, "message", "2 messages"),
        (1, "entry,entries", "1 entry"),
        (13, "entry,entries", "13 entries"),
        ("3", "compaction point", "3 compaction points"),
        (None, "message", ""),
    ],
)
def test_counted(count: Any, noun: str, shown: str) -> None:
    assert counted(count, noun) == shown


def test_filters_in_a_template() -> None:
    template = Template(
        "{% load ctxweb_ui %}{{ n|counted:'message' }} · {{ a|change:b }} · {{ r|percent }}"
    )
    assert template.render(Context({"n": 1, "a": 100, "b": 218, "r": 0.5})) == (
        "1 message · +118% · 50%"
    )
