"""Assembling `[*head, summary, *tail]`: the counts are what `ContextState.then` gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.messages import make_summary_message
from compaction.results import Partition
from compaction.run_state import ContextState
from compaction.summary_step import _assembled
from compaction.tokens import message_token_counts
from tests.support.histories import assistant, user


def _state(size: int) -> ContextState:
    messages = [user(f"question {i} " * (i + 1)) if i % 2 else assistant("ok") for i in range(size)]
    # counts that no encoding gives: taken by position, or counted again when they must be
    return ContextState(messages, [1000 + i for i in range(size)])


@settings(deadline=None)  # the first count loads the encoding
@given(st.integers(0, 12), st.data())
def test_assembled_counts_are_those_then_gives(size: int, data: st.DataObject) -> None:
    state = _state(size)
    head_end = data.draw(st.integers(0, size))
    tail_start = data.draw(st.integers(head_end, size))
    head, tail = state.messages[:head_end], state.messages[tail_start:]
    if data.draw(st.booleans()) and head:  # a head message rewritten: not the same object
        head = [dict(head[0]), *head[1:]]
    if data.draw(st.booleans()) and tail:
        tail = [*tail[:-1], dict(tail[-1])]
    parts = Partition(head, state.messages[head_end:tail_start], tail)
    summary = make_summary_message("the summary")
    assembled = _assembled(state, parts, summary, "o200k_base")
    expected = state.then([*head, summary, *tail], "o200k_base")
    assert assembled == expected
    assert assembled.messages[len(head)] is summary


def test_only_the_summary_is_counted() -> None:
    state = _state(6)
    parts = Partition(state.messages[:2], state.messages[2:4], state.messages[4:])
    summary = make_summary_message("the summary")
    assembled = _assembled(state, parts, summary, "o200k_base")
    assert assembled.counts == [1000, 1001, *message_token_counts([summary]), 1004, 1005]
