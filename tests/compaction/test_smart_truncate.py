"""Smart truncation (docs/behaviour.md#smart-truncation)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.alternation import alternates
from compaction.errors import InvalidMessagesError
from compaction.messages import blocks_of, tool_use_ids
from compaction.policy import Policy
from compaction.smart_truncate import (
    _may_hold_command,
    has_command_block,
    middle_span,
    smart_truncate,
)
from compaction.tokens import count_tokens, message_token_counts
from compaction.validation import validate_messages
from tests.compaction.sized import text_of
from tests.support.histories import assistant, histories, system, user

BIG = Policy(smart_truncate_max_tokens=10_000_000)

CODE = "".join(
    f"class Model{i}:\n    def save(self):\n        return {i}\n\n\n"
    f"def helper_{i}():\n    pass\n\n\n"
    for i in range(10)
)
NUMBERED = "\n".join(f"{n:6}→{line}" for n, line in enumerate(CODE.splitlines(), start=1))


def pair(tool_id: str, name: str, tool_input: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": result}],
        },
    ]


def read(tool_id: str, path: str = "app/models.py", result: str = NUMBERED) -> list[dict[str, Any]]:
    return pair(tool_id, "Read", {"file_path": path}, result)


def bash(tool_id: str, output: str = "") -> list[dict[str, Any]]:
    return pair(tool_id, "Bash", {"command": "pytest"}, output or text_of(150))


def talk(count: int, tokens: int = 100, start: int = 0) -> list[dict[str, Any]]:
    """Alternating user/assistant text messages of exactly `tokens` tokens each."""
    messages = []
    for number in range(start, start + count):
        text = text_of(tokens)
        messages.append(user(text) if number % 2 == 0 else assistant(text))
    return messages


def results_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        block["tool_use_id"]: block["content"]
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    }


def all_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [tool_id for message in messages for tool_id in tool_use_ids(message)]


# the middle (docs/behaviour.md#smart-truncation) --------------------------------------------------


def test_middle_span_uses_cumulative_token_positions() -> None:
    assert middle_span([10] * 6) == (1, 5)  # starts at 10..40 lie in [10, 50)
    assert middle_span([100, 1, 1, 1, 100]) == (1, 5)
    assert middle_span([1000, 1, 1]) == (0, 0)  # no message starts inside the span
    assert middle_span([]) == (0, 0)


def test_middle_span_bounds_are_configurable() -> None:
    assert middle_span([10] * 10, 0.5, 1.0) == (5, 10)
    assert middle_span([10] * 10, 0.0, 0.2) == (0, 2)


# tool filtering in the middle (docs/behaviour.md#smart-truncation) --------------------------------


def tool_session() -> list[dict[str, Any]]:
    messages = [system(), user("start"), *bash("b_head"), *read("r_head")]
    messages += talk(30, start=1)
    for number in range(6):
        messages += bash(f"b{number}") + read(f"r{number}")
        messages += talk(2, start=1)
    messages += talk(30, start=1)
    messages += [*bash("b_tail"), assistant("the end")]
    return messages


def call_index(messages: list[dict[str, Any]], tool_id: str) -> int:
    return next(i for i, m in enumerate(messages) if tool_id in tool_use_ids(m))


def test_the_middle_loses_its_tool_calls_but_keeps_file_views() -> None:
    messages = tool_session()
    result = smart_truncate(messages, BIG)
    lo, hi = result.detail["middle"]
    assert (lo, hi) == middle_span(message_token_counts(messages))
    middle_ids = set(all_ids(messages[lo:hi]))
    kept = set(all_ids(result.messages))
    assert {f"b{n}" for n in range(6)} | {f"r{n}" for n in range(6)} <= middle_ids
    assert not {"b_head", "r_head", "b_tail"} & middle_ids
    assert not kept & {f"b{n}" for n in range(6)}  # removed with their results
    assert not set(results_of(result.messages)) & {f"b{n}" for n in range(6)}
    assert {f"r{n}" for n in range(6)} <= kept  # file views stay, with their pairs
    assert {"b_head", "b_tail", "r_head"} <= kept  # outside the middle: untouched
    assert result.detail["removed_tool_calls"] == result.detail["removed_tool_results"] == 6
    assert validate_messages(result.messages) == []


def test_text_in_the_middle_is_kept() -> None:
    messages = tool_session()
    messages[call_index(messages, "b2")]["content"].insert(
        0, {"type": "text", "text": "checking tests"}
    )
    result = smart_truncate(messages, BIG)
    # Its call went, so the text joined the next assistant message (roles alternate).
    assert any(
        m["role"] == "assistant" and m["content"][0] == {"type": "text", "text": "checking tests"}
        for m in result.messages
    )
    assert alternates(result.messages)


def test_a_kept_file_view_keeps_its_pair_when_other_calls_go() -> None:
    messages = [user("start"), *talk(5, start=1)]
    messages.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "r", "name": "Read", "input": {"file_path": "a.py"}},
                {"type": "tool_use", "id": "b", "name": "Bash", "input": {"command": "ls"}},
            ],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "r", "content": NUMBERED},
                {"type": "tool_result", "tool_use_id": "b", "content": "a.py"},
            ],
        }
    )
    messages += talk(5, start=1)
    result = smart_truncate(messages, BIG)
    assert all_ids(result.messages) == ["r"]
    assert list(results_of(result.messages)) == ["r"]
    assert validate_messages(result.messages) == []


# folding file views (docs/behaviour.md#smart-truncation) ------------------------------------------


def test_every_file_view_is_folded_in_the_middle_or_not() -> None:
    messages = tool_session()
    result = smart_truncate(messages, BIG)
    folded = results_of(result.messages)
    for tool_id in ["r_head", *(f"r{n}" for n in range(6))]:
        assert folded[tool_id].startswith(
            "<system-reminder>\nFolded app/models.py (90 lines, names only)"
        )
        assert "class Model0 L1-3" in folded[tool_id]
        assert "def save" not in folded[tool_id]
    assert result.detail["folded_results"] == 7
    assert result.detail["folded_paths"] == ["app/models.py"] * 7


def test_folding_uses_the_line_numbers_of_a_partial_read() -> None:
    partial = "\n".join(f"{n:6}→{line}" for n, line in enumerate(CODE.splitlines(), start=101))
    messages = [user("start"), *read("r", result=partial), assistant("ok")]
    result = smart_truncate(messages, BIG)
    assert "class Model0 L101-103" in results_of(result.messages)["r"]


def test_a_fold_that_is_not_smaller_is_not_applied() -> None:
    messages = [user("start"), *read("r", result="x = 1"), assistant("ok")]
    result = smart_truncate(messages, BIG)
    assert result.messages == messages
    assert result.detail["folded_results"] == 0
    assert result.truncated is False


def test_failed_reads_and_non_view_editor_calls_are_not_folded() -> None:
    failed = read("r", result=NUMBERED)
    failed[1]["content"][0]["is_error"] = True
    create = pair("e", "str_replace_editor", {"command": "create", "path": "a.py"}, CODE)
    messages = [user("start"), *create, *failed, assistant("ok")]
    result = smart_truncate(messages, BIG)
    assert result.detail["middle"] == [3, 5]  # the create pair lies before it
    assert results_of(result.messages) == {"r": NUMBERED, "e": CODE}


# deleting from the centre (docs/behaviour.md#smart-truncation) ------------------------------------


def test_deletion_takes_a_heuristic_batch_from_the_centre_outward() -> None:
    messages = talk(30)  # 3000 tokens, 100 each
    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=2000))
    assert result.detail["middle"] == [5, 25]
    assert result.detail["batch_size"] == 10  # 1000 to remove / 100 average
    assert result.detail["deleted_indexes"] == list(range(11, 21))  # centre 15, outward
    assert result.tokens_after == 2000
    assert result.removed_message_count == 10
    assert result.messages == messages[:11] + messages[21:]


def test_deletion_runs_once_even_if_still_over() -> None:
    messages = talk(1, tokens=3000) + talk(30, start=1)  # 6000 tokens
    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=1000))
    assert result.detail["middle"] == [1, 21]
    assert result.detail["batch_size"] == 50  # 5000 to remove / 100 average
    assert result.detail["deleted_indexes"] == list(range(1, 21))  # the whole middle
    assert result.tokens_after == 4000 > 1000


def test_the_safety_factor_scales_the_decision() -> None:
    messages = talk(30)
    plain = smart_truncate(messages, Policy(smart_truncate_max_tokens=3000))
    assert plain.detail["deleted_messages"] == 0
    scaled = smart_truncate(messages, Policy(smart_truncate_max_tokens=3000, safety_factor=1.5))
    assert scaled.detail["batch_size"] == 10  # to 3000 / 1.5 = 2000 tokens
    assert scaled.tokens_after == 2000


def test_deletion_never_splits_a_tool_call_from_its_result() -> None:
    messages = [user("start")]
    for number in range(40):
        messages += read(f"r{number}", result="x = 1")  # a fold would not be smaller
    messages.append(assistant("end"))
    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=300))
    assert result.detail["deleted_messages"] > 0
    deleted = set(result.detail["deleted_indexes"])
    for index in deleted:
        partner = index + 1 if messages[index]["role"] == "assistant" else index - 1
        assert partner in deleted
    assert validate_messages(result.messages) == []


def test_first_last_system_and_outside_the_middle_are_kept() -> None:
    messages = [system(), *talk(20)]
    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=1))
    lo, hi = result.detail["middle"]
    assert result.messages[0] is messages[0]
    assert result.messages[1] is messages[1]
    assert result.messages[-1] is messages[-1]
    assert set(result.detail["deleted_indexes"]) == set(range(lo, hi))
    assert validate_messages(result.messages) == []


def test_command_blocks_are_never_deleted_or_thinned() -> None:
    messages = talk(30)
    messages[15] = user("<command-name>/deploy</command-name>\n<command-args>prod</command-args>")
    messages[16:18] = bash("in_command")
    messages[16]["content"].insert(0, {"type": "text", "text": "<command>deploy</command>"})
    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=2000))
    assert messages[15] in result.messages
    assert messages[16] in result.messages
    # The user message after the deleted ones is merged into it, after its own blocks.
    assert any(m["content"][:1] == messages[17]["content"] for m in result.messages)
    assert {15, 16, 17}.isdisjoint(result.detail["deleted_indexes"])
    assert result.detail["deleted_messages"] >= result.detail["batch_size"]
    assert validate_messages(result.messages) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("<command>run</command>", True),
        ("<command-name>/review</command-name>", True),
        ('<command name="x">', True),
        ("<commander>", False),
        ("the command ran", False),
    ],
)
def test_has_command_block(text: str, found: bool) -> None:
    assert has_command_block(user(text)) is found


# Input handling ----------------------------------------------------------------------------


def test_input_is_never_mutated_and_untouched_messages_keep_identity() -> None:
    messages = tool_session()
    snapshot = copy.deepcopy(messages)
    result = smart_truncate(messages, Policy(smart_truncate_max_tokens=2000))
    assert messages == snapshot
    changed = set(result.detail["changed_indexes"])
    originals = {id(m) for m in messages}
    for message in result.messages:
        if id(message) in originals:
            assert messages.index(message) not in changed


def test_nothing_to_do_returns_the_same_messages() -> None:
    messages = talk(6)
    result = smart_truncate(messages, BIG)
    assert result.truncated is False
    assert all(a is b for a, b in zip(result.messages, messages, strict=True))
    assert result.tokens_after == result.tokens_before == 600


def test_invalid_history_is_refused() -> None:
    with pytest.raises(InvalidMessagesError):
        smart_truncate([user("x"), bash("t")[0]])


# Properties --------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_rounds=10), max_tokens=st.integers(1, 3000))
def test_smart_truncate_properties(history: list[dict[str, Any]], max_tokens: int) -> None:
    snapshot = copy.deepcopy(history)
    result = smart_truncate(history, Policy(smart_truncate_max_tokens=max_tokens))
    assert history == snapshot
    assert validate_messages(result.messages) == []
    assert result.tokens_before == count_tokens(history)
    assert result.tokens_after == count_tokens(result.messages) <= result.tokens_before
    # The first message is kept, as is or with a same-role neighbour merged after it (when
    # the messages between them went, the roles still alternate).
    first, blocks = result.messages[0], blocks_of(history[0])
    assert first is history[0] or first["content"][: len(blocks)] == blocks
    # The last message is kept, as is or merged after a same-role neighbour.
    last, blocks = result.messages[-1], blocks_of(history[-1])
    assert last is history[-1] or last["content"][-len(blocks) :] == blocks
    # Recoverable: each input message is kept as is, or its index is reported.
    detail = result.detail
    reported = set(detail["deleted_indexes"]) | set(detail["emptied_indexes"])
    reported |= set(detail["changed_indexes"]) | set(detail["merged_indexes"])
    kept = {id(m) for m in result.messages}
    for index, message in enumerate(history):
        assert (id(message) in kept) != (index in reported)
    merged = len(detail["merged_indexes"])
    assert len(result.messages) == len(history) - result.removed_message_count - merged


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<command", "<command>", "-name>", " x", "\n", "<comm", "and>", ""]),
        max_size=4,
    ),
    st.sampled_from(["text", "thinking", "tool_result", "list_result", "string"]),
)
def test_the_quick_command_test_never_misses_one(pieces: list[str], kind: str) -> None:
    if kind == "string":
        message: dict[str, Any] = {"role": "user", "content": "".join(pieces)}
    elif kind == "list_result":
        inner = [{"type": "text", "text": piece} for piece in pieces]
        message = {"role": "user", "content": [{"type": "tool_result", "content": inner}]}
    else:
        key = "content" if kind == "tool_result" else kind
        message = {"role": "user", "content": [{"type": kind, key: p} for p in pieces]}
    assert _may_hold_command(message) or not has_command_block(message)
