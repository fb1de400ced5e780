"""The fold budget (docs/behaviour.md#file-outlines): which outline lines to drop, decided in one
pass.

Drop ratio = tokens / budget - 1 (never below 0). Over budget, the batch size is the
tokens to remove divided by the average tokens of a droppable line, and that many lines are
dropped at once, chosen by a `random.Random(seed)` (same seed, same choice). The result is
not counted again to try once more, even if it is still over budget.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..tokens import count_text_tokens_each

__all__ = ["BudgetPlan", "TokenMeter", "plan_drops"]


class TokenMeter:
    """Counts tokens with tiktoken, one pass over a list of texts per call, and counts those
    passes. A pass is a plain loop: a fold counts a few short lines per file, far too little
    for tiktoken's thread pool to pay for starting and feeding its threads."""

    def __init__(self, encoding: str | None = None) -> None:
        self.encoding = encoding
        self.passes = 0

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, in one tiktoken pass."""
        self.passes += 1
        return count_text_tokens_each(texts, self.encoding)


@dataclass(frozen=True)
class BudgetPlan:
    """The decision: which droppable lines go, and the figures it came from."""

    drop: frozenset[int]
    drop_ratio: float
    batch_size: int


def plan_drops(line_tokens: Sequence[int], fixed_tokens: int, budget: int, seed: int) -> BudgetPlan:
    """Pick the droppable lines (by index into `line_tokens`) to remove in one go."""
    total = fixed_tokens + sum(line_tokens)
    drop_ratio = max(0.0, total / budget - 1)
    if drop_ratio == 0 or not line_tokens:
        return BudgetPlan(frozenset(), drop_ratio, 0)
    average = max(sum(line_tokens) / len(line_tokens), 1.0)
    batch_size = min(len(line_tokens), math.ceil((total - budget) / average))
    chosen = random.Random(seed).sample(range(len(line_tokens)), batch_size)
    return BudgetPlan(frozenset(chosen), drop_ratio, batch_size)
