"""validate_messages: every problem, with its path; ensure_valid raises them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import InvalidMessagesError, validate_messages, validation
from compaction.errors import Problem
from compaction.validation import ensure_valid
from tests.support.histories import (
    assistant,
    exchange,
    histories,
    system,
    tool_call,
    tool_results,
    user,
)


def paths(messages) -> list[str]:
    return [problem.path for problem in validate_messages(messages)]


def only(messages) -> Problem:
    problems = validate_messages(messages)
    assert len(problems) == 1, problems
    return problems[0]


def test_a_valid_history_has_no_problems():
    messages = [
        system("s"),
        user("q"),
        *exchange("t1"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "x"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "look"},
                {"type": "tool_use", "id": "t2", "name": "View", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [
                        {"type": "text", "text": "ok"},
                        {"type": "image", "source": {"type": "base64", "data": ""}},
                        {"type": "document", "source": {"type": "text", "data": "d"}},
                    ],
                    "is_error": False,
                },
                {"type": "image", "source": {"type": "url", "url": "https://x"}},
            ],
        },
        assistant("done", id="m1", usage={"output_tokens": 3}),
    ]

    assert validate_messages(messages) == []
    assert validate_messages(tuple(messages)) == []
    assert validate_messages([]) == []
    ensure_valid(messages)


@pytest.mark.parametrize("value", [None, "text", {"role": "user"}, 3])
def test_messages_must_be_a_list(value):
    assert only(value) == Problem("messages", "must be a list of messages")


def test_a_message_must_be_an_object():
    assert only([user("a"), "b"]).path == "messages[1]"


@pytest.mark.parametrize("role", ["tool", "robot", None, 1])
def test_role_must_be_known(role):
    problem = only([{"role": role, "content": "x"}])

    assert problem.path == "messages[0].role"
    assert repr(role) in problem.message


@pytest.mark.parametrize("content", ["", "   \n", []])
def test_content_must_not_be_empty(content):
    assert only([{"role": "user", "content": content}]) == Problem(
        "messages[0].content", "must not be empty"
    )


@pytest.mark.parametrize("content", [None, 3, {"type": "text"}])
def test_content_must_be_a_string_or_a_list(content):
    assert only([{"role": "user", "content": content}]).path == "messages[0].content"


def test_blocks_must_be_objects_with_known_types():
    messages = [{"role": "user", "content": ["x", {"type": "video"}, {"text": "no type"}]}]

    assert paths(messages) == [
        "messages[0].content[0]",
        "messages[0].content[1].type",
        "messages[0].content[2].type",
    ]


@pytest.mark.parametrize(
    ("block", "path", "words"),
    [
        ({"type": "text"}, "text", "string text"),
        ({"type": "text", "text": 5}, "text", "string text"),
        ({"type": "text", "text": "  "}, "text", "must not be empty"),
        ({"type": "thinking"}, "thinking", "string thinking"),
        ({"type": "redacted_thinking"}, "data", "string data"),
        ({"type": "image"}, "source", "source object"),
        ({"type": "document", "source": "x"}, "source", "source object"),
    ],
)
def test_block_fields(block, path, words):
    problem = only([{"role": "assistant", "content": [block]}])

    assert problem.path == f"messages[0].content[0].{path}"
    assert words in problem.message


def test_tool_use_needs_id_name_input_and_an_assistant():
    block = {"type": "tool_use", "id": "", "name": 3, "input": []}

    assert paths([{"role": "user", "content": [block]}]) == [
        "messages[0].content[0]",
        "messages[0].content[0].id",
        "messages[0].content[0].name",
        "messages[0].content[0].input",
    ]


def test_tool_result_needs_an_id_and_a_user_message():
    problems = validate_messages(
        [{"role": "assistant", "content": [{"type": "tool_result", "content": "x"}]}]
    )

    assert [str(p) for p in problems] == [
        "messages[0].content[0]: tool_result belongs in a user message",
        "messages[0].content[0].tool_use_id: tool_result needs tool_use_id",
    ]


def test_tool_result_content_shapes():
    bad_list = {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "tool_use"}, 4]}
    bad_value = {"type": "tool_result", "tool_use_id": "t", "content": 4}

    assert paths([{"role": "user", "content": [bad_list, bad_value]}]) == [
        "messages[0].content[0].content[0]",
        "messages[0].content[0].content[1]",
        "messages[0].content[1].content",
    ]


def test_system_messages_may_stand_anywhere():
    # Claude Code 2.1 sends system messages mid-conversation (issue 10).
    assert validate_messages([system("a"), user("q"), system("b"), assistant("x")]) == []
    assert validate_messages([user("q"), assistant("x"), system("b")]) == []


def test_a_system_message_may_not_separate_a_call_from_its_result():
    messages = [user("q"), tool_call("t1"), system("note"), tool_results(("t1", "x"))]

    assert paths(messages) == ["messages[1]", "messages[3]"]


def test_a_tool_use_needs_its_result_in_the_next_message():
    problem = only([user("q"), tool_call("t1"), assistant("skipped the result")])

    assert problem == Problem(
        "messages[1]", "tool_use 't1' has no tool_result in the next user message"
    )


def test_a_tool_use_at_the_end_has_no_result():
    assert only([user("q"), tool_call("t1")]).path == "messages[1]"


def test_an_orphan_tool_result():
    problem = only([user("q"), assistant("a"), tool_results(("ghost", "x"))])

    assert problem.path == "messages[2]"
    assert "'ghost' answers no tool_use in the previous message" in problem.message


def test_a_result_must_be_in_the_very_next_message():
    messages = [user("q"), tool_call("t1"), user("interjection"), tool_results(("t1", "x"))]

    assert paths(messages) == ["messages[1]", "messages[3]"]


def test_a_tool_use_answered_twice():
    messages = [user("q"), tool_call("t1"), tool_results(("t1", "a"), ("t1", "b"))]

    assert "more than one tool_result" in only(messages).message


def test_tool_use_ids_may_repeat_across_turns():
    # Agents that number their calls per turn send `call_0` every turn (issue 10): a result
    # answers the call with its id in the message right before it.
    messages = [user("q"), *exchange("call_0"), *exchange("call_0"), *exchange("call_0")]

    assert validate_messages(messages) == []


def test_tool_use_ids_must_be_unique_within_a_message():
    call = tool_call("t1")
    call["content"].append(dict(call["content"][0]))
    messages = [user("q"), call, tool_results(("t1", "a"))]

    problem = only(messages)
    assert problem.path == "messages[1]"
    assert "used more than once in this message" in problem.message


def test_a_repeated_id_answers_only_the_previous_message():
    messages = [user("q"), *exchange("t1"), assistant("x"), user("y"), tool_results(("t1", "a"))]

    assert "'t1' answers no tool_use in the previous message" in only(messages).message


def test_every_problem_is_reported_not_just_the_first():
    messages = [{"role": "x", "content": ""}, {"role": "user", "content": 3}, "oops"]

    assert paths(messages) == [
        "messages[0].role",
        "messages[0].content",
        "messages[1].content",
        "messages[2]",
    ]


def test_ensure_valid_raises_with_all_problems():
    messages = [{"role": "user", "content": ""}] * 12

    with pytest.raises(InvalidMessagesError) as caught:
        ensure_valid(messages)

    error = caught.value
    assert len(error.problems) == 12
    assert isinstance(error, ValueError)
    assert "messages[0].content: must not be empty" in str(error)
    assert "(and 2 more)" in str(error)


def test_validation_never_changes_the_input():
    messages = [user(""), tool_results(("ghost", "x"))]
    before = [dict(m) for m in messages]

    validate_messages(messages)

    assert messages == before


def test_a_compaction_validates_its_input_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from compaction import Policy, compact_messages
    from compaction import validation as validation_module
    from compaction.summarizers.scripted import ScriptedSummarizer
    from tests.support.histories import synthetic_history

    history = synthetic_history(60, words_per_message=20)
    checked: list[int] = []
    original = validation_module.validate_messages

    def counting(messages: Any, *, check_order: bool = True) -> list[Any]:
        checked.extend(id(message) for message in messages)
        return original(messages, check_order=check_order)

    monkeypatch.setattr(validation_module, "validate_messages", counting)
    result = compact_messages(
        history,
        Policy(steps=("selective", "summary")),
        summarizer=ScriptedSummarizer(default="the summary"),
        force=True,
    )

    assert result.compacted
    input_checks = [identity for identity in checked if identity in {id(m) for m in history}]
    assert len(input_checks) == len(history), "each input message is checked once"


def test_inside_a_scope_a_new_invalid_message_is_still_refused() -> None:
    from compaction.validation import validation_scope

    valid = [{"role": "user", "content": "hi"}]
    with validation_scope():
        ensure_valid(valid)
        ensure_valid(valid)  # remembered
        with pytest.raises(InvalidMessagesError):
            ensure_valid([*valid, {"role": "user", "content": ""}])
        answer = tool_results(("t1", "output"))
        ensure_valid([answer], check_order=False)  # the message alone is fine
        with pytest.raises(InvalidMessagesError):  # its order (no call before it) is not
            ensure_valid([answer])


# The one-pass check of plain histories agrees with the full check ----------------------------

_BLOCK_MUTATIONS: list[tuple[str, Any]] = [
    ("type", "video"),
    ("type", None),
    ("text", "  \n"),
    ("text", ""),
    ("text", 5),
    ("id", ""),
    ("id", 7),
    ("name", ""),
    ("input", []),
    ("tool_use_id", ""),
    ("content", 5),
    ("content", [{"type": "tool_use"}]),
    ("content", [1]),
    ("thinking", None),
    ("data", None),
    ("source", "x"),
]


def _mutate(messages: list[dict[str, Any]], data: Any) -> list[dict[str, Any]]:
    messages = copy.deepcopy(messages)
    index = data.draw(st.integers(0, len(messages) - 1))
    kind = data.draw(st.integers(0, 6))
    if kind == 0:
        del messages[index]
    elif kind == 1 and index + 1 < len(messages):
        messages[index], messages[index + 1] = messages[index + 1], messages[index]
    elif kind == 2:
        messages[index]["role"] = data.draw(st.sampled_from(["tool", "user", "assistant", None]))
    elif kind == 3:
        messages[index]["content"] = data.draw(st.sampled_from(["", " \n", [], None, 5]))
    elif kind == 4:
        messages.insert(index, system("mid"))
    elif isinstance(messages[index]["content"], list):
        blocks = messages[index]["content"]
        block = blocks[data.draw(st.integers(0, len(blocks) - 1))]
        if kind == 5:
            blocks.append(copy.deepcopy(block))  # a repeated id, or a repeated answer
        else:
            key, value = data.draw(st.sampled_from(_BLOCK_MUTATIONS))
            if data.draw(st.booleans()):
                block[key] = value
            else:
                block.pop(key, None)
    return messages


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_rounds=5), st.data(), st.booleans())
def test_the_one_pass_check_agrees_with_the_full_check(
    history: list[dict[str, Any]], data: Any, check_order: bool
) -> None:
    messages = _mutate(history, data) if data.draw(st.integers(0, 4)) else history
    full = validation._problems(messages, check_order=check_order)
    assert validation._plainly_valid(messages, check_order=check_order) == (full == [])
    assert validate_messages(messages, check_order=check_order) == full


def test_unusual_types_go_to_the_full_check() -> None:
    class Text(str):
        pass

    messages: list[Any] = [user("q"), assistant("a")]
    messages[0]["content"] = Text("q")
    assert not validation._plainly_valid(messages, check_order=True)
    assert validate_messages(messages) == []
