"""The threshold line of the timeline: one stretch per threshold in force, and offload files."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import Compaction
from sessions_app.viewmodels.offloads import OffloadFile, offload_view
from sessions_app.viewmodels.thresholds import threshold_segments


def record(number: int, threshold: int | None, **fields: Any) -> Compaction:
    return Compaction(number=number, threshold_tokens=threshold, **fields)


def segments(drops: list[tuple[float, Compaction]], current: int) -> list[tuple[Any, ...]]:
    made = threshold_segments(drops, current, left=0, right=100, y=lambda v: -v)
    return [(s.x1, s.x2, s.tokens, s.numbers, s.current) for s in made]


def test_no_recorded_threshold_is_one_line_at_the_current_one() -> None:
    assert segments([], 500) == [(0, 100, 500, (), True)]
    assert segments([(40, record(1, None))], 500) == [(0, 100, 500, (), True)]


def test_each_threshold_is_drawn_up_to_the_compaction_that_ran_under_it() -> None:
    drops: list[tuple[float, Compaction]] = [
        (20, record(1, 300)),
        (50, record(2, 300)),
        (70, record(3, 400)),
    ]
    assert segments(drops, 500) == [
        (0, 50, 300, (1, 2), False),
        (50, 70, 400, (3,), False),
        (70, 100, 500, (), True),
    ]


def test_the_current_threshold_extends_the_last_one_when_it_is_the_same() -> None:
    drops = [(20, record(1, 300)), (60, record(2, None)), (80, record(3, 400))]
    made = threshold_segments(drops, 400, left=0, right=100, y=lambda v: v)
    assert [(s.x1, s.x2, s.tokens) for s in made] == [(0, 20, 300), (20, 100, 400)]
    assert made[0].description == "Compaction threshold 300 tokens, in force for compaction #1"
    assert made[1].description.endswith("in force for compaction #3 and now")
    assert made[1].y == 400


@pytest.mark.parametrize(
    ("compaction", "expected"),
    [
        (Compaction(strategy="offload", details={}), None),
        (
            Compaction(
                strategy="offload",
                details={"offload": {"files": [{"name": "a.md", "bytes": 12}, {"x": 1}, 3]}},
            ),
            [OffloadFile("a.md", 12)],
        ),
        (
            Compaction(
                strategy="p: offload+summary",
                details={
                    "steps": [
                        {"step": "offload", "changed": True, "detail": {"files": ["/x/b.md"]}}
                    ]
                },
            ),
            [OffloadFile("b.md")],
        ),
        (Compaction(strategy="p: summary", details={"steps": [{"step": "summary"}]}), None),
    ],
)
def test_offload_files_of_a_record(compaction: Compaction, expected: Any) -> None:
    view = offload_view(compaction)
    assert (view.files if view else None) == expected
