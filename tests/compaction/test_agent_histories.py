"""Engine invariants on histories as agents send them (issue 10), property-tested.

Tool ids repeat across turns (`call_0` every turn), user and assistant messages alternate,
system messages may stand mid-conversation. Every step must accept such a history, keep it
valid, and keep it alternating.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import (
    PRESETS,
    ExtractiveSummarizer,
    Policy,
    ScriptedSummarizer,
    compact_messages,
    count_tokens,
    hard_truncate,
    offload_tool_results,
    partition,
    prune_tool_blocks,
    smart_truncate,
    validate_messages,
)
from compaction.alternation import same_role_neighbours
from compaction.retention import extract_identifiers
from tests.compaction.turns import agent_histories

CI = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

small_policies = st.builds(
    Policy,
    context_limit=st.integers(300, 6000),
    trigger_ratio=st.sampled_from([0.5, 0.8, 0.92]),
    tail_retention_ratio=st.sampled_from([0.0, 0.05, 0.2]),
    keep_recent_messages=st.integers(0, 4),
    summary_max_tokens=st.integers(50, 300),
    dialogue_rounds_keep_min=st.integers(0, 3),
    tool_blocks_keep_recent=st.integers(0, 4),
    tool_call_threshold=st.integers(10, 200),
    tool_result_threshold=st.integers(10, 200),
    preview_tokens=st.integers(1, 20),
    smart_truncate_max_tokens=st.integers(1, 3000),
    max_retries=st.just(0),
    min_recall=st.just(0.0),
)


class MemoryStore:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def write(self, name: str, data: bytes) -> str:
        self.blobs[name] = data
        return name

    def exists(self, name: str) -> bool:
        return name in self.blobs


def assert_provider_valid(messages: list[dict[str, Any]]) -> None:
    assert validate_messages(messages) == []
    assert same_role_neighbours(messages) == [], [m["role"] for m in messages]


@CI
@given(agent_histories())
def test_generated_histories_reuse_ids_and_alternate(messages):
    assert_provider_valid(messages)


@CI
@given(agent_histories(), small_policies)
def test_partition_accepts_them(messages, policy):
    result = partition(messages, policy)

    assert result.head + result.middle + result.tail == messages


@CI
@given(agent_histories(), small_policies)
def test_prune_keeps_them_valid_and_alternating(messages, policy):
    snapshot = copy.deepcopy(messages)

    result = prune_tool_blocks(messages, policy)

    assert_provider_valid(result.messages)
    assert count_tokens(result.messages) <= count_tokens(messages)
    assert messages == snapshot


@CI
@given(agent_histories(), small_policies)
def test_smart_truncate_keeps_them_valid_and_alternating(messages, policy):
    result = smart_truncate(messages, policy)

    assert_provider_valid(result.messages)
    assert result.tokens_after <= result.tokens_before


@CI
@given(agent_histories(), st.integers(60, 3000), st.integers(0, 6))
def test_hard_truncate_keeps_them_valid_and_alternating(messages, limit, keep):
    policy = Policy(context_limit=limit, trigger_ratio=0.5, keep_recent_messages=keep)

    result = hard_truncate(messages, policy)

    assert_provider_valid(result.messages)


@CI
@given(agent_histories(), st.integers(0, 400))
def test_offload_gives_every_result_its_own_file(messages, min_chars):
    store = MemoryStore()

    first = offload_tool_results(messages, None, min_chars=min_chars, store=store)
    second = offload_tool_results(messages, None, min_chars=min_chars, store=store)

    assert_provider_valid(first.messages)
    assert_provider_valid(second.messages)
    # Nothing is replaced: the second call wrote new files for the same ids.
    assert len(store.blobs) == first.offloaded_count + second.offloaded_count
    assert not set(first.files) & set(second.files)


@CI
@given(agent_histories(min_rounds=2), small_policies, st.sampled_from(sorted(PRESETS)))
def test_every_preset_compacts_them_into_valid_alternating_output(messages, sizes, preset):
    policy = Policy.preset(
        preset,
        context_limit=sizes.context_limit,
        tool_blocks_keep_recent=sizes.tool_blocks_keep_recent,
        tool_result_threshold=sizes.tool_result_threshold,
        smart_truncate_max_tokens=sizes.smart_truncate_max_tokens,
        keep_recent_messages=sizes.keep_recent_messages,
        max_retries=0,
        min_recall=0.5,
    )
    snapshot = copy.deepcopy(messages)

    result = compact_messages(
        messages,
        policy,
        summarizer=ExtractiveSummarizer(),
        archive_store=MemoryStore(),
        offload_store=MemoryStore(),
        force=True,
    )

    assert result.reason != "invalid_output"
    assert_provider_valid(result.messages)
    assert count_tokens(result.messages) <= count_tokens(messages)
    assert messages == snapshot
    assert result.stats.compacted_message_count + result.stats.retained_message_count == (
        len(messages) if result.compacted else 0
    )


@CI
@given(agent_histories(min_rounds=2), small_policies)
def test_a_scripted_summary_compaction_alternates(messages, policy):
    result = compact_messages(
        messages,
        policy.replace(steps=("selective", "summary", "smart_truncate", "hard_truncate")),
        summarizer=ScriptedSummarizer(default="Goals and key decisions:\n- go on"),
        force=True,
    )

    assert_provider_valid(result.messages)


@CI
@given(agent_histories())
def test_identifiers_are_extracted(messages):
    assert isinstance(extract_identifiers(messages), list)
