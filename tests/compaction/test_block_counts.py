"""Counts by content block (compaction/block_counts.py) are the engine's counts."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings

from compaction import block_counts
from compaction.block_counts import BlockCounts
from compaction.tokens import count_text_tokens, message_token_counts, message_tokens
from tests.support.histories import histories

CI = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@CI
@given(histories(max_rounds=8))
def test_message_counts_are_the_engines(history: list[dict[str, Any]]) -> None:
    assert BlockCounts(None).count_messages(history) == message_token_counts(history)


@CI
@given(histories(max_rounds=8))
def test_a_rebuilt_message_is_counted_from_its_blocks(history: list[dict[str, Any]]) -> None:
    counts = BlockCounts(None)
    counts.count_messages(history)
    for message in history:
        content = message["content"]
        if isinstance(content, list) and len(content) > 1:
            rebuilt = {**message, "content": [*content[1:], {"type": "text", "text": "new"}]}
            assert counts.message(rebuilt) == message_tokens(rebuilt)


def test_each_distinct_text_is_encoded_once() -> None:
    log = "tests/test_app.py::test_case PASSED\n" * 50
    history: list[dict[str, Any]] = [
        {"role": "user", "content": log},
        {"role": "assistant", "content": [{"type": "text", "text": log}]},
        {"role": "user", "content": "".join(log)},  # equal text, another object
    ]
    with mock.patch.object(block_counts, "count_text_tokens", wraps=count_text_tokens) as counted:
        assert BlockCounts(None).count_messages(history) == message_token_counts(history)
    assert counted.call_count == 1
