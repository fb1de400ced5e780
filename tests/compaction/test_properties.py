"""Engine invariants over generated valid histories with tool calls (hypothesis)."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import (
    Policy,
    ScriptedSummarizer,
    compact_messages,
    count_tokens,
    hard_truncate,
    partition,
    validate_messages,
)
from compaction.hard_truncate import hard_limit_tokens
from compaction.messages import is_safe_cut, is_summary_message
from compaction.partition import leading_system_count
from tests.support.histories import histories

CI = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

policies = st.builds(
    Policy,
    context_limit=st.integers(200, 6000),
    trigger_ratio=st.sampled_from([0.5, 0.8, 0.92]),
    tail_retention_ratio=st.sampled_from([0.0, 0.05, 0.1, 0.3]),
    keep_recent_messages=st.integers(0, 4),
    summary_max_tokens=st.integers(50, 300),
    dialogue_rounds_keep_min=st.integers(0, 3),
    max_retries=st.just(0),
    min_recall=st.just(0.0),
    reserved_tokens=st.sampled_from([0, 0, 40, 150]),
)
summaries = st.sampled_from(
    ["Goals and key decisions:\n- go on", "- short", "Files: src/app.py\nState: testing"]
)


class MemoryStore:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def write(self, name: str, data: bytes) -> str:
        self.blobs[name] = data
        return name

    def exists(self, name: str) -> bool:
        return name in self.blobs


def archived(store: MemoryStore) -> list[dict[str, object]]:
    return [m for data in store.blobs.values() for m in json.loads(data)]


def assert_recoverable(original, output, store: MemoryStore) -> None:
    """Every original message is in the output (same object) or in the archive (equal)."""
    kept = {id(m) for m in output}
    archive = archived(store)
    for message in original:
        assert id(message) in kept or message in archive


@CI
@given(histories())
def test_generated_histories_are_valid(messages):
    assert validate_messages(messages) == []


@CI
@given(histories(), policies)
def test_partition_covers_the_input_and_never_splits_pairs(messages, policy):
    result = partition(messages, policy)

    assert result.head + result.middle + result.tail == messages
    assert len(result.head) == leading_system_count(messages)
    assert is_safe_cut(messages, len(result.head) + len(result.middle))
    body = len(messages) - len(result.head)
    assert len(result.tail) >= min(policy.keep_recent_messages, body)


@CI
@given(histories(), policies)
def test_round_protection_never_empties_the_middle(messages, policy):
    protected = partition(messages, policy.replace(steps=("selective", "summary")))
    unprotected = partition(messages, policy.replace(steps=("summary",)))

    assert len(protected.tail) >= len(unprotected.tail)
    if unprotected.middle:
        assert protected.middle


@CI
@given(histories(min_rounds=2), policies, summaries)
def test_summary_compaction_invariants(messages, policy, summary):
    policy = policy.replace(steps=("summary",))
    snapshot = copy.deepcopy(messages)
    store = MemoryStore()

    result = compact_messages(
        messages,
        policy,
        summarizer=ScriptedSummarizer(default=summary),
        archive_store=store,
        session_id="p",
        force=True,
    )
    output = result.messages

    assert validate_messages(output) == []
    assert count_tokens(output) <= count_tokens(messages)
    head = leading_system_count(messages)
    assert all(a is b for a, b in zip(output[:head], messages[:head], strict=True))
    if result.compacted:
        assert is_summary_message(output[head])
        tail = output[head + 1 :]
        assert all(a is b for a, b in zip(tail, messages[len(messages) - len(tail) :], strict=True))
        assert result.stats.compacted_message_count + result.stats.retained_message_count == len(
            messages
        )
    else:
        assert output is messages
    assert_recoverable(messages, output, store)
    assert messages == snapshot


@CI
@given(histories(min_rounds=2), policies, summaries, st.sampled_from([1.0, 1.1, 1.5]))
def test_full_chain_invariants(messages, policy, summary, hard_factor):
    policy = policy.replace(
        steps=("selective", "summary", "smart_truncate", "hard_truncate"),
        hard_limit=int(policy.threshold * hard_factor),
        smart_truncate_max_tokens=300,
        tool_call_threshold=60,
        tool_result_threshold=80,
        preview_tokens=20,
    )
    snapshot = copy.deepcopy(messages)
    store = MemoryStore()

    result = compact_messages(
        messages,
        policy,
        summarizer=ScriptedSummarizer(default=summary),
        archive_store=store,
        force=True,
    )

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= count_tokens(messages)
    head = leading_system_count(messages)
    if result.messages[:head] != messages[:head]:
        # Only hard truncation may cut a system prompt: one too big to leave the newest
        # messages half of the hard limit (see test_an_oversized_system_prompt_is_cut_too).
        assert any(step.step == "hard_truncate" and step.changed for step in result.steps)
    assert_recoverable(messages, result.messages, store)
    assert messages == snapshot


@CI
@given(histories(), st.integers(60, 3000), st.integers(0, 6), st.sampled_from([0, 0, 25]))
def test_hard_truncate_always_fits_and_stays_valid(messages, limit, keep, reserved):
    policy = Policy(
        context_limit=limit, trigger_ratio=0.5, keep_recent_messages=keep, reserved_tokens=reserved
    )
    snapshot = copy.deepcopy(messages)

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= max(hard_limit_tokens(policy), 0) or (
        not result.truncated and count_tokens(messages) <= hard_limit_tokens(policy)
    )
    assert result.tokens_after == count_tokens(result.messages)
    assert messages == snapshot
