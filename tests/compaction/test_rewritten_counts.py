"""Counts of messages rewritten by pruning, from their sources' counts (issue 14)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import message_token_counts, message_tokens
from compaction.policy import Policy
from compaction.prune import prune_tool_blocks
from compaction.rewritten_counts import rewritten_message_tokens
from tests.support.encoded import recording_encodes
from tests.support.histories import histories


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_rounds=8), keep=st.integers(0, 3), threshold=st.integers(1, 40))
def test_a_rewritten_message_is_counted_as_a_fresh_count_would(history, keep, threshold):
    # Pruning drops tool calls from messages with text and cuts results to previews: the
    # rewrite's count from its source's count and the changed blocks is its own count.
    policy = Policy(
        tool_blocks_keep_recent=keep,
        tool_result_threshold=threshold,
        tool_call_threshold=threshold,
        preview_tokens=5,
    )
    pruned = prune_tool_blocks(history, policy, merge_roles=False)
    counts = message_token_counts(history)
    rewritten = 0
    for message, source in zip(pruned.messages, pruned.source_indexes, strict=True):
        old = history[source]
        if message is not old:
            rewritten += 1
            assert rewritten_message_tokens(old, counts[source], message) == message_tokens(message)
    assert rewritten or not pruned.changed_messages


def test_a_rewrite_encodes_the_smaller_side():
    text = " ".join(["word"] * 500)
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}
    old = {"role": "assistant", "content": [{"type": "text", "text": text}, call]}
    new = {"role": "assistant", "content": [old["content"][0]]}
    count = message_tokens(old)
    with recording_encodes() as encoded:
        assert rewritten_message_tokens(old, count, new) == message_tokens(new)
    assert text not in encoded[:-1]  # the last encode is message_tokens' own
    assert encoded[:-1] == ["Read", '{"file_path":"a.py"}']


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_rounds=4), data=st.data())
def test_any_change_of_blocks_is_counted_as_a_fresh_count_would(history, data):
    # Blocks dropped (the fast path), but also moved, listed twice or new (the fallback).
    contents = [m["content"] for m in history if isinstance(m["content"], list)]
    blocks = [block for content in contents for block in content if isinstance(block, dict)]
    if not blocks:
        return
    pick = st.sampled_from(blocks)
    before = data.draw(st.lists(pick, min_size=1, max_size=5))
    after = data.draw(st.lists(st.one_of(st.sampled_from(before), pick), max_size=5))
    if data.draw(st.booleans()):  # a subsequence of `before`: blocks dropped only
        after = [block for block in before if data.draw(st.booleans())]
    old = {"role": "assistant", "content": before}
    new = {"role": "assistant", "content": after}
    count = message_tokens(old)
    assert rewritten_message_tokens(old, count, new) == message_tokens(new)


def test_a_block_listed_more_often_is_counted_afresh() -> None:
    # The same objects on both sides, in other numbers: identity sets alone saw no change.
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "src/app.py"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "config", "is_error": True}
    old = {"role": "assistant", "content": [call, call, call, result]}
    new = {"role": "assistant", "content": [call, call, result, result]}
    assert rewritten_message_tokens(old, message_tokens(old), new) == message_tokens(new)
