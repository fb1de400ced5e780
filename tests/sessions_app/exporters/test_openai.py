"""`openai_tail` and `continues_openai`: when appended messages convert as they would alone."""

from __future__ import annotations

import itertools
from typing import Any

from sessions_app.exporters.openai import continues_openai, openai_tail, to_openai
from tests.support.histories import assistant, system, tool_call, tool_results, user

#: One message of each shape the conversion treats differently.
SHAPES: list[dict[str, Any]] = [
    user("plain"),
    {"role": "user", "content": [{"type": "text", "text": "blocks"}]},
    tool_results(("t1", "out")),
    assistant("text"),
    tool_call("t1"),
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]},
    system("note"),
]


def converted(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = to_openai(messages)["messages"]
    return result


def test_appended_messages_that_continue_convert_as_they_would_alone() -> None:
    continued = split = 0
    for before_size, after_size in itertools.product((1, 2, 3), (1, 2)):
        for before in itertools.product(SHAPES, repeat=before_size):
            tail = openai_tail(before)
            for after in itertools.product(SHAPES, repeat=after_size):
                whole = converted([*before, *after])
                alone = converted(list(before)) + converted(list(after))
                if tail is not None and continues_openai(tail, after[0]):
                    assert whole == alone, (before, after)
                    continued += 1
                elif whole != alone:
                    split += 1
    assert continued > 1000
    assert split > 100  # the cases refused do convert differently


def test_the_tail_is_the_last_message_as_ordered() -> None:
    assert openai_tail([]) is None
    assert openai_tail([user("q")]) == ("user", False)
    assert openai_tail([user("q"), tool_call("t1")]) == ("assistant", True)
    assert openai_tail([user("q"), tool_call("t1"), system("s")]) is None, "s waits"
    assert openai_tail([tool_call("t1"), system("s"), tool_results(("t1", "o"))]) == (
        "system",
        False,
    )


def test_a_system_message_after_a_tool_call_does_not_continue() -> None:
    assert not continues_openai(("assistant", True), system("s"))
    assert continues_openai(("assistant", False), system("s"))
    assert continues_openai(("assistant", True), tool_results(("t1", "o")))
    assert not continues_openai(("user", False), user("again"))
