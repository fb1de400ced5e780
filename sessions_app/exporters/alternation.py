"""Alternating roles on the way out: stored same-role neighbours become one message.

The store keeps messages as they came (an import or a client may have sent two user
messages in a row); strict providers and many chat templates reject that, so every context
and export response goes through `merge_adjacent_roles` (docs/exports.md).
"""

from __future__ import annotations

from typing import Any

from compaction import blocks_of

__all__ = ["merge_adjacent_roles"]


def merge_adjacent_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with every run of same-role neighbours merged into one message.

    A merged message has the run's blocks in order (string content counts as one text
    block) and the first message's other keys. In a merged user message the tool_result
    blocks come first, as the Anthropic API requires, each keeping its order; so a tool_use
    stays answered by the next message. Messages without a same-role neighbour are returned
    as they are (not copied); the input is never changed.
    """
    merged: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for message in messages:
        if run and message.get("role") != run[0].get("role"):
            merged.append(_merged(run))
            run = []
        run.append(message)
    if run:
        merged.append(_merged(run))
    return merged


def _merged(run: list[dict[str, Any]]) -> dict[str, Any]:
    if len(run) == 1:
        return run[0]
    blocks = [block for message in run for block in blocks_of(message)]
    if run[0].get("role") == "user":
        results = [block for block in blocks if block.get("type") == "tool_result"]
        blocks = results + [block for block in blocks if block.get("type") != "tool_result"]
    return {**run[0], "content": blocks}
