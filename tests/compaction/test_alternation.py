"""Role alternation (issue 10): engine outputs never leave two user or two assistant messages
next to each other when the input alternates; `merge_adjacent_roles` for stored histories."""

from __future__ import annotations

import copy
from typing import Any

import compaction
from compaction import (
    Policy,
    ScriptedSummarizer,
    compact_messages,
    count_tokens,
    merge_adjacent_roles,
    prune_tool_blocks,
    smart_truncate,
    validate_messages,
)
from compaction.alternation import alternates, merge_new_neighbours, same_role_neighbours
from compaction.messages import SUMMARY_KEY, is_summary_message, starts_round
from tests.support.histories import assistant, exchange, system, tool_call, tool_results, user
from tests.support.histories import words as many

SUMMARY = "Goals and key decisions:\n- go on"


# --- the helpers ----------------------------------------------------------------------------


def test_merge_adjacent_roles_is_exported_for_the_web_app():
    assert "merge_adjacent_roles" in compaction.__all__
    assert "alternates" in compaction.__all__


def test_neighbours_of_one_role_are_merged_in_order():
    messages = [
        user("a", id="m1"),
        user("b", id="m2"),
        assistant("x"),
        assistant("y"),
        system("note"),
        assistant("z"),
    ]
    snapshot = copy.deepcopy(messages)

    merged = merge_adjacent_roles(messages)

    assert merged == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "id": "m1",  # the first message's extra keys
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
        },
        messages[4],
        messages[5],
    ]
    assert merged[2] is messages[4]  # untouched: the same objects
    assert merged[3] is messages[5]
    assert messages == snapshot
    assert count_tokens(merged) == count_tokens(messages)


def test_a_system_message_separates_turns():
    messages = [user("a"), system("note"), user("b"), assistant("x")]

    assert alternates(messages)
    assert merge_adjacent_roles(messages) == messages
    assert same_role_neighbours([user("a"), user("b"), assistant("x")]) == [1]


def test_a_merged_message_is_meta_only_when_both_were():
    meta_then_real = merge_adjacent_roles([user("injected", is_meta=True), user("real request")])
    both_meta = merge_adjacent_roles([user("a", is_meta=True), user("b", is_meta=True)])

    assert "is_meta" not in meta_then_real[0]
    assert starts_round(meta_then_real[0])
    assert both_meta[0]["is_meta"] is True


def test_results_keep_their_call_when_merged():
    messages = [user("q"), tool_call("t1"), tool_results(("t1", "ok")), user("and then")]

    merged = merge_adjacent_roles(messages)

    assert [b["type"] for b in merged[2]["content"]] == ["tool_result", "text"]
    assert validate_messages(merged) == []


def test_tool_results_first_is_an_option_of_the_one_merge():
    messages = [
        tool_call("t1"),
        user("an interruption"),
        tool_results(("t1", "ok")),
        system("a note"),
        system("another note"),
    ]

    kept = merge_adjacent_roles(messages)
    first = merge_adjacent_roles(messages, tool_results_first=True)

    assert [b["type"] for b in kept[1]["content"]] == ["text", "tool_result"]
    assert [b["type"] for b in first[1]["content"]] == ["tool_result", "text"]
    assert first[1]["content"][0] is messages[2]["content"][0]
    assert validate_messages(first) == []
    assert [m["role"] for m in first] == ["assistant", "user", "system", "system"]
    assert first[2] is messages[3], "a run of one is passed through"


def test_merge_system_joins_neighbouring_system_messages_in_order():
    messages = [system("a"), system("b"), user("q"), system("c")]

    merged = merge_adjacent_roles(messages, merge_system=True)

    assert [m["role"] for m in merged] == ["system", "user", "system"]
    assert [b["text"] for b in merged[0]["content"]] == ["a", "b"]
    assert merged[2] is messages[3]
    assert merge_adjacent_roles(messages) == messages, "system messages are not turns"


def test_input_neighbours_that_were_not_changed_stay_apart():
    messages = [user("a"), user("b"), assistant("x")]

    assert merge_new_neighbours(messages, [0, 1, 2]) == messages  # neighbours in the input
    assert len(merge_new_neighbours(messages, [0, 5, 6])) == 2  # something was removed between
    assert len(merge_new_neighbours(messages, [None, 1, 2])) == 2  # a new message


# --- every step that removes messages -------------------------------------------------------


def test_pruning_merges_the_assistant_text_left_by_dropped_calls():
    old_call = tool_call("t_old", text="Let me look at the old code first.")
    messages = [
        user("go"),
        old_call,
        tool_results(("t_old", "old output")),
        *exchange("t1"),
        *exchange("t2"),
        assistant("done"),
    ]

    result = prune_tool_blocks(messages, Policy(tool_blocks_keep_recent=2))

    assert alternates(result.messages)
    assert result.messages[1]["content"][0] == old_call["content"][0]  # the text, first
    assert result.messages[1]["content"][1]["id"] == "t1"  # then the next turn's call
    assert validate_messages(result.messages) == []


def test_pruning_merges_user_text_left_by_dropped_results():
    answer = tool_results(("t_old", "old output"))
    answer["content"].append({"type": "text", "text": "also check the docs"})
    messages = [user("go"), tool_call("t_old"), answer, user("more"), *exchange("t1")]
    messages.append(assistant("done"))
    messages[3:3] = [assistant("noted")]  # alternating input

    result = prune_tool_blocks(messages, Policy(tool_blocks_keep_recent=1))

    assert alternates(result.messages)
    texts = [b["text"] for b in result.messages[0]["content"]]
    assert texts == ["go", "also check the docs"]


def talk(pairs: int, size: int = 60) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for number in range(pairs):
        messages += [user(f"q{number} " + many(size)), assistant(f"a{number} " + many(size))]
    return messages


def test_smart_truncation_merges_what_deleting_from_the_centre_leaves():
    messages = [system("agent"), *talk(15)]

    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=1700))

    assert result.detail["deleted_indexes"] == [15, 16, 17]  # an odd batch: users 14, 18 meet
    assert result.detail["merged_indexes"] == [18]
    assert alternates(result.messages)
    assert validate_messages(result.messages) == []


def test_the_summary_absorbs_the_user_message_after_it():
    messages = [system("agent"), *talk(8)]
    policy = Policy(keep_recent_messages=4, tail_retention_ratio=0, steps=("summary",))

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY), force=True)

    summary = result.messages[1]
    assert alternates(result.messages)
    assert is_summary_message(summary)
    assert summary[SUMMARY_KEY]["message_count"] == 12
    assert summary["content"][1] == {"type": "text", "text": messages[-4]["content"]}
    assert result.messages[2:] == messages[-3:]
    # The merged message is not in the output as itself: archived, counted as compacted.
    assert result.stats.retained_message_count == 4
    assert result.stats.compacted_message_count == 13


def test_pruned_tail_neighbours_are_merged_after_the_summary():
    messages = [system("agent"), user("go " + many(200)), assistant("ok " + many(200))]
    messages += [tool_call("t_old", text="first, the old file"), tool_results(("t_old", "x"))]
    messages += [*exchange("t1"), assistant("done"), user("thanks")]
    policy = Policy(
        keep_recent_messages=6,
        tail_retention_ratio=0,
        tool_blocks_keep_recent=1,
        dialogue_rounds_keep_min=0,
        steps=("selective", "summary"),
    )

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY), force=True)

    assert result.compacted
    assert alternates(result.messages)
    assert validate_messages(result.messages) == []


# --- system messages mid-conversation (issue 10) --------------------------------------------


def test_a_mid_conversation_system_message_is_ordinary_middle_content():
    messages = [
        system("agent"),
        *talk(3),
        system("Note: the user switched branches"),
        *talk(3),
    ]
    policy = Policy(keep_recent_messages=2, tail_retention_ratio=0, steps=("summary",))
    summarizer = ScriptedSummarizer(SUMMARY)

    result = compact_messages(messages, policy, summarizer=summarizer, force=True)

    assert result.compacted
    assert messages[7] in summarizer.requests[0].messages  # summarized with the middle
    assert all(m is not messages[7] for m in result.messages)
    assert validate_messages(result.messages) == []
    assert result.stats.original_token_count == count_tokens(messages)  # counted


def test_a_mid_conversation_system_message_in_the_tail_is_kept():
    note = system("Note: tests are slow today")
    messages = [system("agent"), *talk(4), note, *talk(1)]
    policy = Policy(keep_recent_messages=3, tail_retention_ratio=0, steps=("summary",))

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY), force=True)

    assert any(m is note for m in result.messages)
    assert alternates(result.messages)


def test_smart_truncation_protects_only_the_leading_system_messages():
    notes = [system(f"note {n} " + many(60)) for n in range(4)]
    messages = [system("agent"), *talk(6)]
    for offset, note in enumerate(notes):
        messages.insert(4 + 2 * offset * 2, note)

    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=400))

    assert result.messages[0] is messages[0]
    assert any(messages[i]["role"] == "system" for i in result.detail["deleted_indexes"])
    assert validate_messages(result.messages) == []
