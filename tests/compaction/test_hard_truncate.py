"""hard_truncate (docs/behaviour.md#hard-truncation): always under the hard limit, always a valid
request."""

from __future__ import annotations

import copy
import importlib
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import (
    InvalidMessagesError,
    Policy,
    PolicyError,
    count_tokens,
    hard_truncate,
    validate_messages,
)
from compaction.hard_truncate import hard_limit_tokens, truncation_notice
from compaction.tokens import message_token_counts
from tests.support.histories import (
    assistant,
    exchange,
    histories,
    system,
    tool_call,
    tool_results,
    user,
    words,
)
from tests.support.histories import qa_conversation as conversation

hard_truncate_module = importlib.import_module("compaction.hard_truncate")


def limit_policy(limit: int, **changes: object) -> Policy:
    return Policy(context_limit=limit, trigger_ratio=0.5, **changes)  # type: ignore[arg-type]


def test_within_the_limit_nothing_changes():
    messages = conversation(3)

    result = hard_truncate(messages, limit_policy(10_000))

    assert not result.truncated
    assert result.messages == messages
    assert result.tokens_before == result.tokens_after == count_tokens(messages)
    assert result.removed_message_count == 0


def test_keeps_the_system_prompt_and_the_newest_messages():
    messages = conversation(20)
    policy = limit_policy(2000, keep_recent_messages=10)

    result = hard_truncate(messages, policy)

    assert result.truncated
    assert result.messages[0] is messages[0]
    assert result.messages[1:] == messages[-10:]
    assert all(a is b for a, b in zip(result.messages[1:], messages[-10:], strict=True))
    assert result.removed_message_count == len(messages) - 11
    assert result.tokens_after == count_tokens(result.messages)
    assert result.tokens_after <= hard_limit_tokens(policy)


def test_keeps_fewer_messages_when_the_newest_do_not_fit():
    messages = conversation(20, size=100)
    policy = limit_policy(600, keep_recent_messages=10)

    result = hard_truncate(messages, policy)

    assert 1 < len(result.messages) < 11
    assert result.messages[1:] == messages[-(len(result.messages) - 1) :]
    assert count_tokens(result.messages) <= 600


def test_uses_the_explicit_hard_limit():
    messages = conversation(20)
    policy = Policy(context_limit=100_000, trigger_ratio=0.001, hard_limit=900)

    result = hard_truncate(messages, policy)

    assert result.truncated
    assert count_tokens(result.messages) <= 900


def test_safety_factor_scales_the_limit():
    messages = conversation(20)
    policy = limit_policy(2000, safety_factor=1.5)

    result = hard_truncate(messages, policy)

    assert policy.scaled(count_tokens(result.messages)) <= 2000
    assert hard_limit_tokens(policy) == 1333


def test_never_splits_a_tool_pair():
    messages = [
        system("s"),
        user("q " + words(200)),
        *exchange("t1", result=words(200)),
        *exchange("t2", result=words(200)),
        assistant("done"),
    ]
    policy = limit_policy(600, keep_recent_messages=2)  # the 2 newest would start on t2's result

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert result.messages[1] is messages[4]  # t2's tool_use came along
    assert count_tokens(result.messages) <= 600


def test_a_single_oversized_message_is_cut_with_a_marker():
    messages = [system("s"), user("q"), assistant("a"), user("huge " + words(5000))]
    policy = limit_policy(500)

    result = hard_truncate(messages, policy)

    assert result.truncated
    assert count_tokens(result.messages) <= 500
    last = result.messages[-1]
    assert last["content"].startswith("huge alpha")
    assert "by ctxweb hard limit ...]" in last["content"]
    assert truncation_notice(count_tokens([messages[-1]])) in last["content"]
    assert result.messages[0] is messages[0]
    assert validate_messages(result.messages) == []


def test_an_oversized_tool_result_is_cut_and_keeps_its_pair():
    messages = [
        system("s"),
        user("q"),
        tool_call("t1", "Read", {"file_path": "big.py"}),
        tool_results(("t1", words(6000))),
    ]
    policy = limit_policy(400, keep_recent_messages=1)

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= 400
    assert result.messages[-2]["content"][0]["type"] == "tool_use"
    block = result.messages[-1]["content"][0]
    assert block["tool_use_id"] == "t1"
    assert "by ctxweb hard limit" in block["content"]


def test_an_oversized_tool_input_is_cut_into_an_object():
    messages = [
        system("s"),
        user("q"),
        tool_call("t1", "Write", {"file_path": "a.py", "content": words(6000)}),
        tool_results(("t1", "ok")),
    ]
    policy = limit_policy(400, keep_recent_messages=1)

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= 400
    tool_input = result.messages[-2]["content"][0]["input"]
    assert set(tool_input) == {"_truncated"}
    assert "by ctxweb hard limit" in tool_input["_truncated"]


def test_thinking_and_images_are_dropped_before_text_is_cut():
    message = {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}},
            {"type": "text", "text": words(3000)},
        ],
    }
    policy = limit_policy(300)

    result = hard_truncate([system("s"), message], policy)

    assert validate_messages(result.messages) == []
    types = [b["type"] for b in result.messages[-1]["content"]]
    assert types == ["text"]
    assert count_tokens(result.messages) <= 300


def test_an_oversized_system_prompt_is_cut_too():
    messages = [system(words(4000)), user("question " + words(50))]
    policy = limit_policy(500)

    result = hard_truncate(messages, policy)

    assert count_tokens(result.messages) <= 500
    assert result.messages[-1] is messages[-1]  # the newest message survives whole
    assert "by ctxweb hard limit" in result.messages[0]["content"]


def test_never_mutates_and_always_valid():
    messages = [
        system("s"),
        user("q " + words(400)),
        *exchange("t1", result=words(3000)),
        assistant("a " + words(400)),
    ]
    snapshot = copy.deepcopy(messages)

    for limit in (60, 200, 1000, 3000):
        result = hard_truncate(messages, limit_policy(limit))
        assert validate_messages(result.messages) == []
        assert count_tokens(result.messages) <= limit
    assert messages == snapshot


def test_invalid_input_raises():
    with pytest.raises(InvalidMessagesError):
        hard_truncate([tool_results(("t1", "orphan"))])


# --- regressions: the limit holds even where a marker costs as much as it saves ----------

FAILS = "config migration fails README.md value return database TypeError import TODO tests"


def two_failed_reads() -> list[dict[str, object]]:
    """Hypothesis' falsifying example: 62 tokens of small contents, none worth a notice."""
    call = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "return https://example.com/docs"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "src/app.py"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"path": "src/app.py"}},
        ],
    }
    results = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": [{"type": "text", "text": FAILS}],
                "is_error": True,
            }
            for tool_id in ("toolu_1", "toolu_2")
        ],
    }
    return [system(FAILS), user("config"), call, results]


def test_small_contents_are_cut_with_the_short_marker_to_fit():
    messages = two_failed_reads()
    policy = limit_policy(60, keep_recent_messages=0)
    assert count_tokens(messages) == 62

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert result.tokens_after == count_tokens(result.messages) <= 60
    assert result.messages[0] is messages[0]
    assert [m["role"] for m in result.messages] == ["system", "assistant", "user"]
    cut = result.messages[-1]["content"][0]["content"]
    assert cut.startswith("config migration")
    assert cut.endswith("\n[...]")
    assert result.detail["kept_messages"] == 2


def test_every_limit_holds_for_the_falsifying_example():
    messages = two_failed_reads()

    for limit in range(30, 63):
        result = hard_truncate(messages, limit_policy(limit, keep_recent_messages=0))
        assert validate_messages(result.messages) == []
        assert count_tokens(result.messages) <= limit


def test_a_tool_input_too_small_to_mark_becomes_empty():
    messages = [
        user("q"),
        tool_call("t1", "Read", {"path": "src/app.py"}),
        tool_results(("t1", "x")),
    ]

    result = hard_truncate(messages, limit_policy(5, keep_recent_messages=1))

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= 5
    assert result.messages[0]["content"][0]["input"] == {}


def test_the_system_prompt_goes_when_even_its_smallest_form_does_not_fit():
    name = "mcp__build_server__run_the_whole_test_suite"  # 12 tokens, never cut
    messages = [
        system("one"),
        system("two"),
        system("three"),
        user("q"),
        tool_call("t1", name, {"target": "all"}),
        tool_results(("t1", words(100))),
    ]
    policy = limit_policy(14)  # the tail's smallest form is 13 tokens, the prompts' 3

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= 14
    assert [m["role"] for m in result.messages] == ["assistant", "user"]
    assert result.messages[0]["content"][0]["name"] == name


def test_a_limit_below_the_newest_tool_call_leaves_one_marker_message():
    name = "mcp__build_server__run_the_whole_test_suite"
    messages = [system("s"), user("q"), tool_call("t1", name), tool_results(("t1", "ok"))]

    result = hard_truncate(messages, limit_policy(8))

    assert result.messages == [{"role": "user", "content": "[...]"}]
    assert result.removed_message_count == 3
    assert validate_messages(result.messages) == []


def test_a_limit_with_no_room_for_any_message_is_a_policy_error():
    policy = limit_policy(1, safety_factor=2.0)
    assert hard_limit_tokens(policy) == 0

    with pytest.raises(PolicyError) as raised:
        hard_truncate([user("hello")], policy)

    assert raised.value.field == "hard_limit"


tool_inputs = st.dictionaries(st.text(max_size=5), st.text(max_size=200), min_size=1, max_size=3)


@settings(max_examples=80, deadline=None)
@given(st.text(min_size=1, max_size=400), tool_inputs, st.text(max_size=400), st.integers(8, 300))
def test_any_text_fits_once_cut(text, tool_input, result_text, limit):
    # Arbitrary unicode and JSON escaping: tokens merge differently where text is cut.
    messages = [
        system(text if text.strip() else "s"),
        user(text if text.strip() else "q"),
        tool_call("t1", "Write", tool_input, text=text if text.strip() else ""),
        tool_results(("t1", result_text)),
    ]
    policy = limit_policy(limit)

    result = hard_truncate(messages, policy)

    assert validate_messages(result.messages) == []
    assert count_tokens(result.messages) <= hard_limit_tokens(policy)


# Cached counts (token_counts) ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_rounds=8), st.integers(30, 4000))
def test_given_counts_give_the_same_result(history, limit):
    policy = limit_policy(limit)
    try:
        expected = hard_truncate(history, policy)
    except PolicyError:
        return
    got = hard_truncate(history, policy, token_counts=message_token_counts(history))
    assert got == expected
    originals = {id(message): index for index, message in enumerate(history)}
    assert [originals.get(id(m)) for m in got.messages] == [
        originals.get(id(m)) for m in expected.messages
    ]


def test_given_counts_keeping_whole_messages_encodes_nothing():
    messages = conversation(20)
    counts = message_token_counts(messages)
    with mock.patch.object(hard_truncate_module, "message_token_counts") as counted:
        counted.side_effect = lambda batch, encoding=None: [0] * len(batch) if batch else []
        result = hard_truncate(messages, limit_policy(1000), token_counts=counts)
    assert result.truncated
    assert result.tokens_after == count_tokens(result.messages)
    assert all(not call.args[0] for call in counted.call_args_list)


def test_given_counts_must_match_the_messages():
    with pytest.raises(ValueError, match="one count per message"):
        hard_truncate([user("hi")], token_counts=[])
