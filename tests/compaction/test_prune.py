"""Selective pruning of old tool blocks (docs/behaviour.md#selective-pruning, #round-protection)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.errors import InvalidMessagesError
from compaction.messages import tool_use_ids
from compaction.policy import Policy
from compaction.preview import truncation_marker
from compaction.prune import protected_start, prune_tool_blocks
from compaction.tokens import compact_json, count_text_tokens, count_tokens
from compaction.validation import validate_messages
from tests.compaction.sized import input_of, text_of
from tests.support.histories import assistant, histories, user


def step(
    tool_id: str,
    *,
    text: str = "",
    tool_input: dict[str, Any] | None = None,
    result: Any = "ok",
    result_text: str = "",
    thinking: str = "",
) -> list[dict[str, Any]]:
    """An assistant tool call (with optional text/thinking) and its result message."""
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": thinking, "signature": "s"})
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.append(
        {"type": "tool_use", "id": tool_id, "name": "Bash", "input": tool_input or {"c": "ls"}}
    )
    answer: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": tool_id, "content": result}
    ]
    if result_text:
        answer.append({"type": "text", "text": result_text})
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": answer}]


def session(block_count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [user("go")]
    for number in range(block_count):
        messages.extend(step(f"t{number}"))
    messages.append(assistant("done"))
    return messages


def all_tool_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [tool_id for message in messages for tool_id in tool_use_ids(message)]


# Keep the newest 5 blocks, drop older ones whole (docs/behaviour.md#selective-pruning) ------------


def test_keeps_the_newest_five_blocks_and_drops_older_ones_whole() -> None:
    messages = session(7)
    result = prune_tool_blocks(messages)
    assert all_tool_ids(result.messages) == ["t2", "t3", "t4", "t5", "t6"]
    assert (result.tool_blocks_kept, result.tool_blocks_dropped) == (5, 2)
    assert result.messages == [messages[0], *messages[5:]]
    assert result.dropped_messages == messages[1:5]
    assert validate_messages(result.messages) == []


@pytest.mark.parametrize("count", [0, 1, 5])
def test_five_or_fewer_blocks_are_all_kept_untouched(count: int) -> None:
    messages = session(count)
    result = prune_tool_blocks(messages)
    assert result.tool_blocks_dropped == 0
    assert result.tool_blocks_kept == count
    assert all(a is b for a, b in zip(result.messages, messages, strict=True))


@pytest.mark.parametrize(("keep", "kept_ids"), [(0, []), (2, ["t4", "t5"])])
def test_keep_recent_is_configurable(keep: int, kept_ids: list[str]) -> None:
    result = prune_tool_blocks(session(6), Policy(tool_blocks_keep_recent=keep))
    assert all_tool_ids(result.messages) == kept_ids
    assert validate_messages(result.messages) == []


def test_a_block_with_several_calls_counts_once() -> None:
    messages = [user("go")]
    messages.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": f"m{i}", "name": "Bash", "input": {}} for i in range(3)
            ],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"m{i}", "content": "ok"} for i in range(3)
            ],
        }
    )
    for number in range(5):
        messages.extend(step(f"t{number}"))
    result = prune_tool_blocks(messages)
    assert (result.tool_blocks_kept, result.tool_blocks_dropped) == (5, 1)
    assert "m0" not in all_tool_ids(result.messages)


def test_dropping_keeps_assistant_text_and_user_text() -> None:
    messages = [
        user("go"),
        *step("old", text="I will list files", result_text="also, use -la"),
        *session(5)[1:],
    ]
    result = prune_tool_blocks(messages)
    assert result.messages[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I will list files"}],
    }
    assert result.messages[2] == {
        "role": "user",
        "content": [{"type": "text", "text": "also, use -la"}],
    }
    assert result.dropped_messages == []
    assert result.changed_messages == [messages[1], messages[2]]
    assert validate_messages(result.messages) == []


def test_a_message_left_with_only_thinking_is_removed() -> None:
    messages = [user("go"), *step("old", thinking="hmm"), *session(5)[1:]]
    result = prune_tool_blocks(messages)
    assert messages[1] in result.dropped_messages
    assert all(m.get("content") != [{"type": "thinking"}] for m in result.messages)
    assert validate_messages(result.messages) == []


def test_text_and_thinking_stay_together() -> None:
    messages = [user("go"), *step("old", text="plan", thinking="hmm"), *session(5)[1:]]
    result = prune_tool_blocks(messages)
    # They stay, in order; the next assistant message (its neighbour now) is merged in.
    assert [b["type"] for b in result.messages[1]["content"]] == ["thinking", "text", "tool_use"]
    assert result.merged_messages == [messages[3]]
    assert result.changed_messages == [messages[1]]


# Cutting big fields of kept blocks (docs/behaviour.md#selective-pruning) --------------------------


@pytest.mark.parametrize(("tokens", "cut"), [(500, False), (501, True)])
def test_tool_call_arguments_over_500_tokens_are_cut(tokens: int, cut: bool) -> None:
    messages = [user("go"), *step("t1", tool_input=input_of(tokens))]
    result = prune_tool_blocks(messages)
    new_input = result.messages[1]["content"][0]["input"]
    assert result.tool_calls_truncated == int(cut)
    if not cut:
        assert result.messages[1] is messages[1]
        return
    assert set(new_input) == {"_truncated"}
    preview, marker = new_input["_truncated"].rsplit("\n", 1)
    assert marker == truncation_marker(tokens) == f"[TRUNCATED original~{tokens} tokens]"
    original = compact_json(messages[1]["content"][0]["input"])
    assert original.startswith(preview)
    assert count_text_tokens(preview) == 200


@pytest.mark.parametrize(("tokens", "cut"), [(600, False), (601, True)])
def test_tool_results_over_600_tokens_are_cut_to_200(tokens: int, cut: bool) -> None:
    text = text_of(tokens)
    messages = [user("go"), *step("t1", result=text)]
    result = prune_tool_blocks(messages)
    content = result.messages[2]["content"][0]["content"]
    assert result.tool_results_truncated == int(cut)
    if not cut:
        assert content == text
        return
    preview, marker = content.rsplit("\n", 1)
    assert marker == f"[TRUNCATED original~{tokens} tokens]"
    assert text.startswith(preview)
    assert count_text_tokens(preview) == 200


def test_block_list_results_are_cut_to_a_string_and_keep_is_error() -> None:
    blocks = [{"type": "text", "text": text_of(400)}, {"type": "text", "text": text_of(400)}]
    messages = [user("go"), *step("t1", result=blocks)]
    messages[2]["content"][0]["is_error"] = True
    result = prune_tool_blocks(messages)
    block = result.messages[2]["content"][0]
    assert isinstance(block["content"], str)
    assert block["content"].endswith("[TRUNCATED original~800 tokens]")
    assert block["is_error"] is True


def test_preview_and_thresholds_come_from_the_policy() -> None:
    policy = Policy(tool_call_threshold=10, tool_result_threshold=20, preview_tokens=5)
    messages = [user("go"), *step("t1", tool_input=input_of(60), result=text_of(21))]
    result = prune_tool_blocks(messages, policy)
    assert (result.tool_calls_truncated, result.tool_results_truncated) == (1, 1)
    preview = result.messages[2]["content"][0]["content"].rsplit("\n", 1)[0]
    assert count_text_tokens(preview) == 5


def test_a_cut_that_would_not_save_tokens_is_not_made() -> None:
    # 11 tokens over a threshold of 10: a 5-token preview plus the marker is longer.
    policy = Policy(tool_call_threshold=10, preview_tokens=5)
    messages = [user("go"), *step("t1", tool_input=input_of(11))]
    result = prune_tool_blocks(messages, policy)
    assert result.tool_calls_truncated == 0
    assert result.messages[1] is messages[1]


def test_dropped_blocks_are_not_counted_as_truncated() -> None:
    messages = [user("go"), *step("old", result=text_of(900)), *session(5)[1:]]
    result = prune_tool_blocks(messages)
    assert result.tool_results_truncated == 0
    assert result.tool_blocks_dropped == 1


def test_the_preview_never_splits_a_character() -> None:
    messages = [user("go"), *step("t1", result="日本語のテキスト" * 400)]
    result = prune_tool_blocks(messages, Policy(preview_tokens=7))
    preview = result.messages[2]["content"][0]["content"].rsplit("\n", 1)[0]
    assert "\ufffd" not in preview
    assert ("日本語のテキスト" * 400).startswith(preview)


# Rounds (docs/behaviour.md#round-protection) ------------------------------------------------------


def rounds_session(rounds: int, *, meta_every: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for number in range(rounds):
        messages.append(user(f"request {number}"))
        if meta_every and number % meta_every == 0:
            messages.append(user(f"<meta {number}>", is_meta=True))
        messages.extend(step(f"r{number}", text=f"working on {number}"))
        messages.append(assistant(f"answer {number}"))
    return messages


def test_protected_start_is_the_twelfth_newest_real_user_message() -> None:
    messages = rounds_session(14)
    start = protected_start(messages, 12)
    assert messages[start]["content"] == "request 2"


def test_meta_user_messages_do_not_start_rounds() -> None:
    messages = rounds_session(14, meta_every=1)
    start = protected_start(messages, 12)
    assert messages[start]["content"] == "request 2"  # metas are inside rounds, not rounds


def test_everything_is_protected_with_twelve_rounds_or_fewer() -> None:
    assert protected_start(rounds_session(12), 12) == 0
    assert protected_start(rounds_session(3), 12) == 0


def test_zero_rounds_protects_nothing() -> None:
    messages = rounds_session(3)
    assert protected_start(messages, 0) == len(messages)


def test_user_and_assistant_text_of_the_newest_twelve_rounds_survives() -> None:
    messages = rounds_session(14, meta_every=3)
    result = prune_tool_blocks(messages)
    start = protected_start(messages, 12)
    texts = {
        block["text"]
        for message in result.messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "text"
    } | {m["content"] for m in result.messages if isinstance(m["content"], str)}
    for message in messages[start:]:
        content = message["content"]
        if isinstance(content, str):
            assert content in texts
        else:
            for block in content:
                if block["type"] == "text":
                    assert block["text"] in texts
    assert result.tool_blocks_dropped == 9


# Input handling ----------------------------------------------------------------------------


def test_input_is_never_mutated() -> None:
    messages = [user("go"), *step("a", result=text_of(700)), *session(6)[1:]]
    snapshot = copy.deepcopy(messages)
    prune_tool_blocks(messages, Policy(tool_blocks_keep_recent=6))
    prune_tool_blocks(messages)
    assert messages == snapshot


def test_invalid_history_is_refused() -> None:
    with pytest.raises(InvalidMessagesError) as error:
        prune_tool_blocks([user("go"), step("t")[0]])
    assert error.value.problems


# Properties --------------------------------------------------------------------------------

small_policies = st.builds(
    Policy,
    tool_blocks_keep_recent=st.integers(0, 6),
    tool_call_threshold=st.integers(1, 40),
    tool_result_threshold=st.integers(20, 400),
    preview_tokens=st.integers(1, 30),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_rounds=8), policy=small_policies)
def test_prune_properties(history: list[dict[str, Any]], policy: Policy) -> None:
    snapshot = copy.deepcopy(history)
    result = prune_tool_blocks(history, policy)
    assert history == snapshot
    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= count_tokens(history)
    blocks = sum(1 for m in history if m["role"] == "assistant" and tool_use_ids(m))
    assert result.tool_blocks_kept + result.tool_blocks_dropped == blocks
    assert result.tool_blocks_kept == min(blocks, policy.tool_blocks_keep_recent)
    # Recoverable: every input message is in the output as is, or reported as dropped or
    # changed (with its original content).
    output_ids = {id(m) for m in result.messages}
    reported = result.dropped_messages + result.changed_messages + result.merged_messages
    assert len(reported) == len({id(m) for m in reported})  # each in one list
    for message in history:
        assert (id(message) in output_ids) != (id(message) in {id(m) for m in reported})
    merged = len(result.merged_messages)
    assert len(result.messages) + len(result.dropped_messages) + merged == len(history)
