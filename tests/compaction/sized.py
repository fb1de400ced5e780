"""Texts and tool inputs of an exact token count, for threshold tests."""

from __future__ import annotations

from typing import Any

from compaction.tokens import compact_json, count_text_tokens


def text_of(tokens: int) -> str:
    """A text of exactly `tokens` o200k tokens (`x hello hello ...`)."""
    text = "x" + " hello" * (tokens - 1)
    assert count_text_tokens(text) == tokens
    return text


def input_of(tokens: int) -> dict[str, Any]:
    """A tool input whose compact JSON has exactly `tokens` tokens."""
    value = {"q": text_of(tokens - 4)}
    assert count_text_tokens(compact_json(value)) == tokens
    return value
