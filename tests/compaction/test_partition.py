"""should_compact and partition (docs/behaviour.md#trigger-and-partition, #round-protection)."""

from __future__ import annotations

import pytest

from compaction import (
    InvalidMessagesError,
    Policy,
    count_tokens,
    partition,
    should_compact,
)
from compaction.messages import make_summary_message
from compaction.partition import leading_system_count, split_points
from compaction.tokens import message_token_counts
from tests.support.histories import (
    assistant,
    exchange,
    system,
    tool_call,
    tool_results,
    user,
    words,
)

# One token per word for these texts: "w w w ..." is one token per "w " pair in o200k.
SUMMARY_ONLY = {"steps": ("summary",)}


def policy(**changes: object) -> Policy:
    values: dict[str, object] = {"keep_recent_messages": 0, **SUMMARY_ONLY}
    values.update(changes)
    return Policy(**values)  # type: ignore[arg-type]


# --- should_compact ---------------------------------------------------------------------


def test_empty_list_never_compacts():
    assert should_compact([], Policy(context_limit=1, trigger_ratio=0.01)) is False


def test_threshold_is_inclusive():
    messages = [user(words(50))]
    tokens = count_tokens(messages)
    at = Policy(context_limit=tokens, trigger_ratio=1.0)
    above = Policy(context_limit=tokens + 1, trigger_ratio=1.0)

    assert should_compact(messages, at) is True  # tokens == threshold
    assert should_compact(messages, above) is False  # one token short


def test_threshold_is_context_limit_times_ratio():
    messages = [user(words(100))]
    tokens = count_tokens(messages)
    limit = 1000
    ratio_at = tokens / limit

    assert should_compact(messages, Policy(context_limit=limit, trigger_ratio=ratio_at))
    assert not should_compact(messages, Policy(context_limit=limit, trigger_ratio=ratio_at + 0.01))


def test_safety_factor_scales_the_count():
    messages = [user(words(100))]
    tokens = count_tokens(messages)
    limit_policy = Policy(context_limit=int(tokens * 1.5), trigger_ratio=1.0)

    assert not should_compact(messages, limit_policy)
    assert should_compact(messages, limit_policy.replace(safety_factor=1.5))


def test_disabled_policy_never_compacts():
    messages = [user(words(100))]

    assert not should_compact(messages, Policy(context_limit=10, enabled=False))


def test_default_policy_is_used():
    assert should_compact([user("hi")]) is False


def test_invalid_input_raises():
    with pytest.raises(InvalidMessagesError):
        should_compact([{"role": "user", "content": ""}])


# --- partition: docs/behaviour.md#trigger-and-partition -------------------------------------------


def test_head_is_the_leading_system_messages_only():
    messages = [system("a"), system("b"), user("q"), assistant("r")]

    assert leading_system_count(messages) == 2
    result = partition(messages, policy(context_limit=10_000))
    assert result.head == messages[:2]


def test_no_system_message_means_empty_head():
    messages = [user("q"), assistant("r")]

    result = partition(messages, policy())

    assert result.head == []
    assert result.middle + result.tail == messages


def test_single_message_goes_to_the_tail():
    messages = [user(words(500))]

    result = partition(messages, policy(context_limit=100))

    assert (result.head, result.middle, result.tail) == ([], [], messages)


def test_tail_scans_back_until_the_budget_is_reached():
    messages = [user(words(100)), assistant(words(100)), user(words(100)), assistant(words(100))]
    counts = message_token_counts(messages)
    budget = counts[-1] + counts[-2]  # exactly two messages
    ratio = budget / 10_000

    result = partition(messages, policy(context_limit=10_000, tail_retention_ratio=ratio))

    assert result.tail == messages[2:]
    assert result.middle == messages[:2]


def test_the_message_that_crosses_the_budget_is_kept_whole():
    messages = [user(words(100)), assistant(words(100)), user(words(100)), assistant(words(100))]
    counts = message_token_counts(messages)
    budget = counts[-1] + 1  # crossed by the second-to-last message
    ratio = budget / 10_000

    result = partition(messages, policy(context_limit=10_000, tail_retention_ratio=ratio))

    assert result.tail == messages[2:]


def test_head_and_tail_covering_everything_leave_no_middle():
    messages = [system("s"), user("q"), assistant("r")]

    result = partition(messages, policy(context_limit=1_000_000))

    assert result.middle == []
    assert result.head + result.tail == messages


def test_partition_returns_new_lists_of_the_same_messages():
    messages = [system("s"), user(words(50)), assistant(words(50)), user(words(50))]

    result = partition(messages, policy(context_limit=100, tail_retention_ratio=0.01))

    assert result.head + result.middle + result.tail == messages
    assert all(
        a is b for a, b in zip(result.head + result.middle + result.tail, messages, strict=True)
    )
    assert result.tail is not messages


def test_token_counts_can_be_passed_in():
    messages = [user("a"), assistant("b"), user("c")]
    # Pretend the first two are huge: the budget is reached at the last message.
    result = partition(messages, policy(context_limit=100), token_counts=[10, 10, 10_000])

    assert result.tail == messages[2:]
    with pytest.raises(ValueError, match="one count per message"):
        partition(messages, policy(), token_counts=[1])


# --- keep_recent_messages ----------------------------------------------------------------


def test_tail_holds_at_least_keep_recent_messages():
    messages = [user(words(100)), assistant(words(100))] * 5

    result = partition(messages, policy(context_limit=100, keep_recent_messages=6))

    assert len(result.tail) == 6
    assert result.tail == messages[-6:]


def test_keep_recent_larger_than_the_history_keeps_everything_after_the_head():
    messages = [system("s"), user("q"), assistant("r")]

    result = partition(messages, policy(context_limit=100, keep_recent_messages=50))

    assert result.head == messages[:1]
    assert result.middle == []
    assert result.tail == messages[1:]


# --- tool pairs --------------------------------------------------------------------------


def test_tail_never_starts_on_a_tool_result():
    messages = [
        user(words(100)),
        *exchange("t1", "Read", {"file_path": "a.py"}, words(300)),
        assistant(words(10)),
    ]
    counts = message_token_counts(messages)
    # A budget that the scan crosses at the tool_result message (index 2).
    ratio = (counts[3] + counts[2] - 5) / 10_000

    result = partition(messages, policy(context_limit=10_000, tail_retention_ratio=ratio))

    assert result.tail[0] is messages[1]  # moved back to the tool_use
    assert result.middle == messages[:1]


def test_keep_recent_boundary_moves_back_over_a_tool_pair():
    messages = [user(words(10)), *exchange("t1", result=words(10)), *exchange("t2")]

    result = partition(
        messages,
        policy(context_limit=100_000, tail_retention_ratio=0.00001, keep_recent_messages=1),
    )

    assert result.tail == messages[-2:]  # the tool_use came along with its result


def test_parallel_tool_calls_stay_together():
    messages = [
        user(words(50)),
        tool_call("a"),
        tool_results(("a", words(50))),
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "b", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "c", "name": "Read", "input": {}},
            ],
        },
        tool_results(("b", words(200)), ("c", words(200))),
    ]

    result = partition(messages, policy(context_limit=100, keep_recent_messages=1))

    assert result.tail == messages[3:]
    assert result.middle == messages[:3]


def test_split_points_match_partition():
    messages = [system("s"), *([user(words(40)), assistant(words(40))] * 4)]
    chosen = policy(context_limit=500)

    head_end, tail_start = split_points(messages, chosen)
    result = partition(messages, chosen)

    assert (len(result.head), len(result.head) + len(result.middle)) == (head_end, tail_start)


# --- round protection (docs/behaviour.md#round-protection) ----------------------------------------


def rounds_history(count: int, size: int = 30) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [system("s")]
    for number in range(count):
        messages += [user(f"request {number} " + words(size)), assistant(words(size))]
    return messages


def test_selective_in_the_chain_protects_the_newest_rounds():
    messages = rounds_history(20)
    chosen = Policy(
        context_limit=100_000,
        tail_retention_ratio=0.00001,
        keep_recent_messages=0,
        steps=("selective", "summary"),
        dialogue_rounds_keep_min=12,
    )

    result = partition(messages, chosen)

    assert result.tail == messages[-24:]  # 12 rounds of 2 messages
    assert result.tail[0]["content"].startswith("request 8 ")


def test_without_selective_rounds_are_not_protected():
    messages = rounds_history(20)

    result = partition(messages, policy(context_limit=100_000, tail_retention_ratio=0.00001))

    assert result.tail == messages[-1:]


def test_meta_messages_do_not_start_rounds():
    messages = [
        system("s"),
        user("request 0"),
        assistant("a"),
        user("request 1"),
        assistant("b"),
        user("injected reminder", is_meta=True),
        assistant("c"),
    ]
    chosen = Policy(
        context_limit=100_000,
        tail_retention_ratio=0.00001,
        keep_recent_messages=0,
        dialogue_rounds_keep_min=1,
    )

    result = partition(messages, chosen)

    assert result.tail[0] is messages[3]  # the meta message did not start a round


def test_round_protection_yields_when_the_rounds_alone_reach_the_threshold():
    messages = rounds_history(20, size=200)
    total = count_tokens(messages)
    chosen = Policy(
        context_limit=total,
        trigger_ratio=0.5,
        tail_retention_ratio=0.01,
        keep_recent_messages=0,
        summary_max_tokens=100,
        dialogue_rounds_keep_min=12,
    )

    result = partition(messages, chosen)

    assert result.middle, "protection must not leave nothing to compact"
    tail_tokens = count_tokens(result.tail) + count_tokens(result.head) + 100
    assert tail_tokens < chosen.threshold
    assert 1 < len(result.tail) < 24


def test_a_previous_summary_is_in_the_middle_not_the_head():
    messages = [
        system("s"),
        make_summary_message("earlier work"),
        assistant(words(100)),
        user(words(100)),
        assistant(words(10)),
    ]

    result = partition(messages, policy(context_limit=100, keep_recent_messages=1))

    assert result.head == messages[:1]
    assert result.middle[0] is messages[1]


def one_round_session(tool_calls: int) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [system("s"), user("Port the app to Rust")]
    for number in range(tool_calls):
        messages += exchange(f"t{number}", "Bash", {"command": "make"}, words(100))
    return messages


@pytest.mark.parametrize("context_limit", [2_000, 1_000_000])  # over and under the threshold
def test_protection_never_pulls_the_only_round_into_the_tail(context_limit):
    messages = one_round_session(30)
    budget = 200 / context_limit  # a 200-token tail budget: 2 messages
    chosen = Policy.preset("selective", context_limit=context_limit, tail_retention_ratio=budget)

    result = partition(messages, chosen)

    assert result.middle, "one prompt + many tool calls must leave something to compact"
    assert result.middle[0] is messages[1]  # the prompt, then the older tool traffic
    assert result.tail == messages[-10:]  # the budget tail, at least keep_recent_messages


def test_protection_stops_before_the_round_that_would_empty_the_middle():
    messages = rounds_history(5)
    chosen = Policy(
        context_limit=1_000_000,
        tail_retention_ratio=0.00001,
        keep_recent_messages=0,
        steps=("selective", "summary"),
        dialogue_rounds_keep_min=12,
    )

    result = partition(messages, chosen)

    assert result.middle == messages[1:3]  # the oldest round
    assert result.tail == messages[3:]  # the four newer rounds stay protected


def test_zero_tail_ratio_keeps_exactly_keep_recent_messages():
    messages = [system("s"), *([user(words(40)), assistant(words(40))] * 30)]
    assert len(messages) == 61

    result = partition(messages, Policy.preset("auto-compression"))

    assert result.tail == messages[-10:]
    assert result.middle == messages[1:-10]


def test_zero_tail_ratio_moves_the_start_back_only_for_a_tool_pair():
    messages = [system("s"), user(words(40)), *exchange("t1", result=words(400)), user("go")]

    result = partition(messages, policy(tail_retention_ratio=0, keep_recent_messages=2))

    assert result.tail == messages[-3:]  # 2 messages, plus the tool_use of the first one


def test_zero_tail_ratio_and_no_recent_messages_leave_an_empty_tail():
    messages = [system("s"), user(words(40)), assistant(words(40))]

    result = partition(messages, policy(tail_retention_ratio=0, keep_recent_messages=0))

    assert (result.middle, result.tail) == (messages[1:], [])


def test_a_forced_partition_of_a_session_under_the_tail_budget_keeps_the_count_tail() -> None:
    from compaction import Policy
    from compaction.partition import partition as split
    from tests.support.histories import assistant, system, user

    messages = [system("s")] + [
        m for i in range(12) for m in (user(f"question {i}"), assistant(f"answer {i}"))
    ]
    # A 40,000-token tail budget covers everything. (No selective step: its round
    # protection would keep the newest 12 rounds whole, forced or not.)
    policy = Policy(context_limit=200_000, steps=("summary",))

    assert split(messages, policy).middle == []
    forced = split(messages, policy, force=True)

    assert len(forced.tail) == policy.keep_recent_messages
    assert forced.middle == messages[1 : len(messages) - policy.keep_recent_messages]
    assert forced.head == messages[:1]


def test_a_forced_compaction_of_a_small_session_summarizes_its_older_messages() -> None:
    from compaction import Policy, ScriptedSummarizer, compact_messages
    from tests.support.histories import assistant, system, user

    messages = [system("s")] + [
        m for i in range(12) for m in (user(f"question {i}"), assistant(f"answer {i}"))
    ]
    result = compact_messages(
        messages,
        Policy(steps=("summary",)),
        summarizer=ScriptedSummarizer(default="older turns"),
        force=True,
    )

    assert result.compacted
    assert result.messages[0] is messages[0]
    # The newest ten; the first (a user message) is merged into the summary (alternation).
    assert result.messages[-9:] == messages[-9:]
    assert result.messages[1]["content"][1] == {"type": "text", "text": messages[-10]["content"]}
    assert result.stats.compacted_message_count == len(messages) - 10  # the merged one too
