"""The message helpers: blocks, ids, meta and summary markers, safe cuts, rounds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from compaction.messages import (
    SUMMARY_KEY,
    SUMMARY_PREFIX,
    blocks_of,
    first_nonblank_line,
    is_meta,
    is_safe_cut,
    is_summary_message,
    make_summary_message,
    message_text,
    round_starts,
    starts_round,
    tool_result_ids,
    tool_use_ids,
)
from tests.support.histories import assistant, exchange, system, tool_results, user


def test_blocks_of_string_and_list_content():
    assert blocks_of(user("hi")) == [{"type": "text", "text": "hi"}]
    assert blocks_of({"role": "user", "content": [{"type": "text", "text": "a"}, "junk"]}) == [
        {"type": "text", "text": "a"}
    ]
    assert blocks_of({"role": "user"}) == []


def test_tool_ids():
    call, result = exchange("t1")

    assert tool_use_ids(call) == ["t1"]
    assert tool_result_ids(result) == ["t1"]
    assert tool_use_ids(result) == tool_result_ids(call) == []


def test_meta_flags():
    assert is_meta(user("x", is_meta=True))
    assert is_meta(user("x", isMeta=True))
    assert not is_meta(user("x"))


def test_summary_messages_are_recognised_by_key_or_prefix():
    made = make_summary_message("text", level=2)

    assert made == {"role": "user", "content": f"{SUMMARY_PREFIX}\ntext", SUMMARY_KEY: {"level": 2}}
    assert is_summary_message(made)
    assert is_summary_message({"role": "user", "content": f"{SUMMARY_PREFIX}\nx"})
    assert is_summary_message(
        {"role": "user", "content": [{"type": "text", "text": f"{SUMMARY_PREFIX} x"}]}
    )
    assert not is_summary_message(user("an ordinary message"))


def test_the_prefix_is_never_doubled():
    assert make_summary_message(f"{SUMMARY_PREFIX}\nbody")["content"] == f"{SUMMARY_PREFIX}\nbody"


def test_message_text_reads_text_thinking_and_results():
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "b"}]},
            {"type": "tool_result", "tool_use_id": "u", "content": "c"},
            {"type": "image", "source": {}},
        ],
    }

    assert message_text(message) == "a\nb\nc"
    thinking = {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}
    assert message_text(thinking) == "t"


def test_safe_cuts_never_start_on_a_tool_result():
    messages = [user("q"), *exchange("t1"), assistant("a")]

    assert [is_safe_cut(messages, i) for i in range(5)] == [True, True, False, True, True]
    assert is_safe_cut(messages, -1)
    assert is_safe_cut(messages, 99)


def test_rounds_start_at_real_user_messages():
    messages = [
        system("s"),
        user("first"),
        *exchange("t1"),
        user("reminder", is_meta=True),
        make_summary_message("earlier"),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "x", "content": "r"},
                {"type": "text", "text": "and a question"},
            ],
        },
        tool_results(("y", "only a result")),
        user("second"),
    ]

    assert round_starts(messages) == [1, 6, 8]
    assert not starts_round(assistant("a"))


_LINE_PIECES = [" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x1c", "\x85", "\u2028", "\xa0", "a", "b c"]


@given(st.lists(st.sampled_from(_LINE_PIECES), max_size=12).map("".join))
def test_first_nonblank_line_is_the_first_line_splitlines_gives_with_text(text: str) -> None:
    expected = next((line for line in text.splitlines() if line.strip()), "")
    assert first_nonblank_line(text) == expected


def test_first_nonblank_line_keeps_its_indent() -> None:
    assert first_nonblank_line("\n\n   Error: x\nnext") == "   Error: x"
    assert first_nonblank_line(" \r\n\u2028 \t") == ""


_BLOCKS = st.sampled_from(
    [
        {"type": "text", "text": "hi"},
        {"type": "text", "text": f"{SUMMARY_PREFIX} x"},
        {"type": "tool_result", "tool_use_id": "t", "content": "ok"},
        {"type": "tool_use", "id": "t", "name": "Read", "input": {}},
        {"type": "image"},
        "junk",
    ]
)
_CONTENT = st.one_of(
    st.sampled_from(["", "text", f"{SUMMARY_PREFIX}\nx", None, 3]), st.lists(_BLOCKS, max_size=3)
)
_MESSAGES = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": _CONTENT},
    optional={"is_meta": st.booleans(), SUMMARY_KEY: st.just({})},
)


@given(_MESSAGES)
def test_starts_round_and_summary_marks_keep_their_definitions(message: dict[str, Any]) -> None:
    """The shortcuts give what the definitions in their docstrings give."""
    content = message.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        content = content[0].get("text")
    summary = SUMMARY_KEY in message or (
        isinstance(content, str) and content.startswith(SUMMARY_PREFIX)
    )
    assert is_summary_message(message) == summary
    real = message.get("role") == "user" and not is_meta(message) and not summary
    expected = real and any(b.get("type") != "tool_result" for b in blocks_of(message))
    assert starts_round(message) == expected
