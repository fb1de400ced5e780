"""Tool blocks and block removal (`compaction.toolpairs`): the fast paths agree with the
general ones."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.messages import Block, tool_use_ids
from compaction.toolpairs import ToolBlock, rebuild_message, tool_blocks, without_blocks
from tests.support.histories import histories


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_rounds=6))
def test_tool_blocks_are_the_assistant_messages_with_tool_calls(history):
    expected = [
        ToolBlock(index, index + 1, frozenset(tool_use_ids(message)))
        for index, message in enumerate(history)
        if message["role"] == "assistant" and tool_use_ids(message)
    ]
    assert tool_blocks(history) == expected


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_rounds=6), data=st.data())
def test_without_blocks_is_rebuild_message_dropping_them(history, data):
    kind = data.draw(st.sampled_from(["tool_use", "tool_result", "text", "thinking"]))
    ids: frozenset[str] | None = None
    if kind == "tool_result" and data.draw(st.booleans()):
        known = [str(b.get("tool_use_id")) for m in history for b in _blocks(m)]
        ids = frozenset(data.draw(st.lists(st.sampled_from([*known, "other"]), max_size=3)))

    def replace(block: Block) -> Block | None:
        if block.get("type") != kind:
            return block
        return None if ids is None or block.get("tool_use_id") in ids else block

    for message in history:
        expected = rebuild_message(message, replace)
        found = without_blocks(message, kind, ids)
        assert found == expected
        assert (found is message) == (expected is message)


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message["content"]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
