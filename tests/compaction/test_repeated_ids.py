"""Tool ids reused across turns (issue 10): agents send `call_0` every turn.

Pairing is positional (a tool_result answers the tool_use with its id in the message right
before it), so every engine function must accept such a history and pair each result with
its own turn's call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compaction import (
    ExtractiveSummarizer,
    InvalidMessagesError,
    Policy,
    ScriptedSummarizer,
    SummaryRequest,
    compact_messages,
    hard_truncate,
    offload_tool_results,
    partition,
    prune_tool_blocks,
    should_compact,
    smart_truncate,
    validate_messages,
)
from compaction.file_views import file_view_sources
from compaction.retention import extract_identifiers
from tests.support.histories import assistant, exchange, system, tool_call, tool_results, user
from tests.support.histories import words as many


def turns(count: int, size: int = 80) -> list[dict[str, Any]]:
    """`count` rounds, each calling Read then Bash, both numbered from call_0 per turn."""
    messages: list[dict[str, Any]] = [system("agent")]
    for number in range(count):
        messages.append(user(f"step {number}: " + many(20)))
        call = tool_call("call_0", "Read", {"file_path": f"src/m{number}.py"})
        call["content"].append(
            {"type": "tool_use", "id": "call_1", "name": "Bash", "input": {"command": "ls"}}
        )
        messages.append(call)
        messages.append(
            tool_results(
                ("call_0", f"source of m{number} " + many(size, "beta")),
                ("call_1", f"listing {number} " + many(size, "gamma")),
            )
        )
        messages.append(assistant(f"done {number} " + many(20)))
    return messages


def test_such_a_history_is_valid():
    assert validate_messages(turns(4)) == []


def test_every_engine_function_accepts_it(tmp_path: Path):
    messages = turns(6)
    policy = Policy(context_limit=1500, keep_recent_messages=4, tool_blocks_keep_recent=2)

    assert should_compact(messages, policy)
    assert partition(messages, policy).middle
    for result in (
        prune_tool_blocks(messages, policy).messages,
        smart_truncate(messages, policy.replace(smart_truncate_max_tokens=800)).messages,
        hard_truncate(messages, policy.replace(hard_limit=1400)).messages,
        offload_tool_results(messages, tmp_path).messages,
    ):
        assert validate_messages(result) == []


@pytest.mark.parametrize("preset", ["balanced", "selective", "smart-truncation", "offload"])
def test_compaction_succeeds_for_every_chain(preset: str, tmp_path: Path):
    messages = turns(8)
    policy = Policy.preset(preset, context_limit=2000, smart_truncate_max_tokens=1000)

    result = compact_messages(messages, policy, offload_dir=tmp_path, force=True)

    assert result.compacted, result.reason
    assert validate_messages(result.messages) == []


def test_pruning_drops_each_turn_with_its_own_results():
    messages = turns(4)

    result = prune_tool_blocks(messages, Policy(tool_blocks_keep_recent=1))

    kept_results = [
        block["content"]
        for message in result.messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert [text.split(" ")[:3] for text in kept_results] == [
        ["source", "of", "m3"],
        ["listing", "3", "gamma"],
    ]


def test_smart_truncation_folds_each_view_with_its_own_result():
    messages = [system("agent"), user("read both")]
    for number in range(2):
        source = "".join(f"def f{number}_{n}():\n    return {n}\n\n" for n in range(60))
        messages += exchange("call_0", "Read", {"file_path": f"src/m{number}.py"}, source)
    messages.append(assistant("read"))

    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=10**6))

    assert result.detail["folded_paths"] == ["src/m0.py", "src/m1.py"]
    folded = [
        block["content"]
        for message in result.messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert "f0_0" in folded[0]
    assert "f1_0" not in folded[0]
    assert "f1_0" in folded[1]


def test_a_file_view_is_paired_with_its_own_turn_only():
    # call_0 reads a file and fails; the next turn's call_0 lists a directory. The listing
    # is not the file's source.
    messages = [
        user("look"),
        tool_call("call_0", "Read", {"file_path": "src/app.py"}),
        tool_results(("call_0", "No such file", True)),
        tool_call("call_0", "Bash", {"command": "ls"}),
        tool_results(("call_0", "app.py\nsetup.py")),
        assistant("listed"),
    ]

    assert file_view_sources(messages) == []


def test_retention_names_the_tool_that_failed_in_its_own_turn():
    messages = [
        user("go"),
        tool_call("call_0", "Read", {"file_path": "src/app.py"}),
        tool_results(("call_0", "fine")),
        tool_call("call_0", "Deploy", {"target": "prod"}),
        tool_results(("call_0", "boom", True)),
        assistant("it failed"),
    ]

    identifiers = extract_identifiers(messages)

    assert "Deploy" in identifiers
    assert "Read" not in identifiers


def test_the_extractive_summary_labels_each_result_with_its_own_call():
    messages = [
        user("go"),
        tool_call("call_0", "Read", {"file_path": "src/app.py"}),
        tool_results(("call_0", "the source")),
        tool_call("call_0", "Bash", {"command": "make deploy"}),
        tool_results(("call_0", "Error: deploy failed", True)),
        assistant("it failed"),
    ]

    text = ExtractiveSummarizer().summarize(SummaryRequest(messages=messages, max_tokens=400))

    assert "Bash(make deploy) failed" in text
    assert "Read(src/app.py) failed" not in text


def test_the_summarizer_sees_the_repeated_ids_as_sent():
    summarizer = ScriptedSummarizer("Goals and key decisions:\n- go on")
    policy = Policy(context_limit=1500, keep_recent_messages=2, steps=("summary",))

    result = compact_messages(turns(6), policy, summarizer=summarizer, force=True)

    assert result.compacted
    ids = [
        block["id"]
        for message in summarizer.requests[0].messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_use"
    ]
    assert ids.count("call_0") > 1


def test_a_duplicate_id_within_one_message_is_still_refused():
    call = tool_call("call_0")
    call["content"].append(dict(call["content"][0]))
    messages = [user("go"), call, tool_results(("call_0", "a"))]

    with pytest.raises(InvalidMessagesError, match="used more than once in this message"):
        compact_messages(messages, force=True)


def test_two_results_for_one_id_in_one_message_are_still_refused():
    messages = [user("go"), tool_call("call_0"), tool_results(("call_0", "a"), ("call_0", "b"))]

    with pytest.raises(InvalidMessagesError, match="more than one tool_result"):
        prune_tool_blocks(messages)
