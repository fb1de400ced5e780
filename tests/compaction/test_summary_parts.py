"""Middles larger than one summarizer request (`Policy.summary_input_limit`): summarized in
parts that respect tool pairs, then merged; no request is ever larger than the limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    OpenAISummarizer,
    Policy,
    ScriptedSummarizer,
    SummaryRequest,
    compact_messages,
    count_tokens,
    validate_messages,
)
from compaction.messages import is_summary_message, make_summary_message
from compaction.summarizers.prompt import SYSTEM_PROMPT, build_user_prompt
from compaction.summary_parts import _lines_within
from compaction.tokens import _message_pieces, count_text_tokens, message_token_counts
from tests.support.clock import FakeClock
from tests.support.encoded import recording_encodes
from tests.support.fake_anthropic import Reply
from tests.support.fake_openai import ChatReply
from tests.support.histories import WORDS, exchange, synthetic_history, system, user

LIMIT = 4000
POLICY = Policy(
    context_limit=30_000,  # a tail of 6k tokens: the middle holds most of BIG
    steps=("summary",),
    summary_input_limit=LIMIT,
    keep_recent_messages=6,
    min_recall=0,  # no retention re-ask, except where a test asks for one
)
BIG = synthetic_history(500, words_per_message=150)  # about 55k tokens: 14 times the limit


def request_tokens(request: SummaryRequest) -> int:
    """Tokens of what an API summarizer sends for `request`: system prompt and user turn."""
    return count_text_tokens(SYSTEM_PROMPT) + count_text_tokens(build_user_prompt(request))


class Recorder:
    """The extractive summarizer, recording the size of every request it gets."""

    name = "recorder"

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.sizes.append(request_tokens(request))
        self.requests.append(request)
        return ExtractiveSummarizer().summarize(request)


def archived(path: str | None) -> list[dict[str, object]]:
    assert path is not None
    data: list[dict[str, object]] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def test_the_middle_is_larger_than_the_limit():
    assert count_tokens(BIG) > 8 * LIMIT


def test_every_anthropic_request_stays_under_the_limit(fake_anthropic, tmp_path):
    chosen = AnthropicSummarizer("claude-test", api_key="k", base_url=fake_anthropic.base_url)
    fake_anthropic.script()  # every answer is the default summary

    result = compact_messages(
        BIG, POLICY, summarizer=chosen, archive_dir=tmp_path, clock=FakeClock(), force=True
    )

    assert result.compacted
    sizes = [
        count_text_tokens(r.body["system"]) + count_text_tokens(r.prompt)
        for r in fake_anthropic.requests
    ]
    assert len(sizes) >= 10
    assert max(sizes) <= LIMIT
    assert [m for m in result.messages if is_summary_message(m)] == [result.messages[1]]
    middle = result.partition.middle if result.partition else []
    assert archived(result.archive_path) == middle  # every original, whole
    assert len(middle) + len(result.messages) - 1 == len(BIG)  # system + summary + tail
    assert result.stats.compacted_message_count == len(middle)


def test_every_openai_request_stays_under_the_limit(fake_openai):
    chosen = OpenAISummarizer("gpt-test", api_key="k", base_url=fake_openai.base_url)

    result = compact_messages(BIG, POLICY, summarizer=chosen, clock=FakeClock(), force=True)

    assert result.compacted
    sizes = [
        sum(count_text_tokens(m["content"]) for m in r.body["messages"])
        for r in fake_openai.requests
    ]
    assert len(sizes) >= 10
    assert max(sizes) <= LIMIT


def test_parts_then_a_merge_of_their_summaries():
    recorder = Recorder()

    result = compact_messages(BIG, POLICY, summarizer=recorder, force=True)

    assert result.compacted
    parts = [r for r in recorder.requests if r.part is not None]
    count = len(parts)
    assert count >= 10
    assert [p.part for p in parts] == [(i, count) for i in range(1, count + 1)]
    final = recorder.requests[-1]
    assert final.part is None
    assert final.messages
    assert all(is_summary_message(m) for m in final.messages)
    assert max(recorder.sizes) <= LIMIT
    assert "Please handle task 1:" in (result.summary or "")  # the goal went through the merges
    events = [e.detail for e in result.events if e.phase == "summary_chunk"]
    assert [(d["chunk"], d["chunks"]) for d in events if d["level"] == 1] == [
        (i, count) for i in range(1, count + 1)
    ]
    assert len(events) == len(recorder.requests)
    assert events[-1]["merge"] is True


def test_parts_never_split_a_tool_pair():
    recorder = Recorder()

    compact_messages(BIG, POLICY, summarizer=recorder, force=True)

    for request in recorder.requests:
        assert validate_messages([user("start"), *request.messages]) == [] or all(
            is_summary_message(m) for m in request.messages
        )


def test_summaries_of_summaries_merge_in_levels_when_the_parts_are_many():
    small = Policy(
        steps=("summary",), summary_input_limit=2000, summary_max_tokens=600, min_recall=0
    )
    recorder = Recorder()

    result = compact_messages(BIG, small, summarizer=recorder, force=True)

    assert result.compacted
    levels = {e.detail["level"] for e in result.events if e.phase == "summary_chunk"}
    assert len(levels) >= 3  # parts, merges of parts, the last merge
    assert max(recorder.sizes) <= 2000


def test_an_earlier_summary_in_a_large_middle_is_merged_not_summarized_again():
    earlier = ExtractiveSummarizer().summarize(SummaryRequest(BIG[1:60]))
    history = [BIG[0], make_summary_message(earlier, level=1), *BIG[60:]]
    assert validate_messages(history) == []
    recorder = Recorder()

    compact_messages(history, POLICY, summarizer=recorder, force=True)

    parts = [r for r in recorder.requests if r.part is not None]
    merges = [r for r in recorder.requests if r.part is None]
    assert parts
    assert not any(is_summary_message(m) for p in parts for m in p.messages)
    assert any(history[1] in m.messages for m in merges)  # as it was, beside part summaries


def test_a_message_larger_than_the_limit_is_cut_for_the_request(tmp_path):
    huge = " ".join(f"line{i} of the build log" for i in range(8000))  # ~50k tokens
    history = [
        system(),
        user("Why does the build fail?"),
        *exchange("t1", "Bash", {"command": "make all"}, huge),
        *synthetic_history(200)[1:],
    ]
    recorder = Recorder()

    result = compact_messages(
        history,
        POLICY,
        summarizer=recorder,
        archive_dir=tmp_path,
        force=True,
    )

    assert result.compacted
    assert max(recorder.sizes) <= LIMIT
    sent = "\n".join(build_user_prompt(r) for r in recorder.requests)
    assert "[TRUNCATED original~" in sent
    assert "line0 of the build log" in sent  # its head
    assert "line7999 of the build log" in sent  # and its tail
    assert any(
        block.get("content") == huge
        for message in archived(result.archive_path)
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if isinstance(block, dict)
    )


def test_a_history_over_the_context_limit_still_compacts():
    policy = Policy(context_limit=20_000, summary_input_limit=8000, min_recall=0)
    recorder = Recorder()
    assert count_tokens(BIG) > 2 * policy.context_limit

    result = compact_messages(BIG, policy, summarizer=recorder)

    assert result.compacted
    assert result.stats.compacted_token_count < policy.context_limit
    assert max(recorder.sizes) <= 8000


def test_the_default_extractive_summarizer_honours_the_limit(monkeypatch):
    sizes: list[int] = []
    original = ExtractiveSummarizer.summarize

    def recording(self: ExtractiveSummarizer, request: SummaryRequest) -> str:
        sizes.append(request_tokens(request))
        return original(self, request)

    monkeypatch.setattr(ExtractiveSummarizer, "summarize", recording)

    result = compact_messages(BIG, POLICY, force=True)

    assert result.compacted
    assert result.summarizer == "extractive"
    assert len(sizes) > 1
    assert max(sizes) <= LIMIT


def test_the_retention_re_ask_stays_under_the_limit():
    recorder = Recorder()
    policy = POLICY.replace(min_recall=1.0)

    result = compact_messages(BIG, policy, summarizer=recorder, force=True)

    assert result.compacted
    assert recorder.requests[-1].required_identifiers  # the re-ask happened
    assert max(recorder.sizes) <= LIMIT


def test_a_part_failure_fails_the_summary_and_rolls_back():
    failing = ScriptedSummarizer("Goals and key decisions:\n- part one", default=RuntimeError("x"))

    result = compact_messages(BIG, POLICY.replace(max_retries=0), summarizer=failing, force=True)

    assert not result.compacted
    assert result.reason == "summarizer_error"
    assert result.messages is BIG


def test_a_small_middle_is_one_request_without_part_events():
    recorder = Recorder()
    history = synthetic_history(40)

    result = compact_messages(history, POLICY, summarizer=recorder, force=True)

    assert result.compacted
    assert recorder.requests[0].messages == result.partition.middle if result.partition else []
    assert recorder.requests[0].part is None
    assert not [e for e in result.events if e.phase == "summary_chunk"]


@pytest.mark.parametrize("limit", [1999, 10_000_001])
def test_the_limit_is_bounded(limit):
    from compaction import PolicyError

    with pytest.raises(PolicyError, match="summary_input_limit"):
        Policy(summary_input_limit=limit)


def test_a_server_that_says_the_request_is_too_large_names_the_limit(fake_anthropic):
    fake_anthropic.script(Reply.prompt_too_long())
    chosen = AnthropicSummarizer("claude-test", api_key="k", base_url=fake_anthropic.base_url)

    result = compact_messages(BIG, POLICY, summarizer=chosen, clock=FakeClock(), force=True)

    assert result.reason == "context_exceeded"
    rollback = next(e for e in result.events if e.phase == "rollback")
    assert "summary_input_limit" in rollback.detail["detail"]


def test_openai_parts_are_cut_from_the_same_middle(fake_openai):
    fake_openai.script(
        *[ChatReply.text(f"Goals and key decisions:\n- part {n}") for n in range(30)]
    )
    chosen = OpenAISummarizer("gpt-test", api_key="k", base_url=fake_openai.base_url)

    result = compact_messages(BIG, POLICY, summarizer=chosen, clock=FakeClock(), force=True)

    final_prompt = fake_openai.requests[-1].body["messages"][1]["content"]
    assert "- part 1" in final_prompt
    assert "earlier summaries" in final_prompt
    assert result.compacted


def test_a_parted_summary_from_cached_counts_encodes_no_stored_text():
    # Issue 14: with the counts cached only new text is counted (the part summaries, the
    # summary, the identifier lines of the re-ask), never a stored message's text.
    history = [_with_text(message, index) for index, message in enumerate(BIG)]
    counts = message_token_counts(history)
    stored = {piece for m in history for piece in _message_pieces(m, "m")[0] if len(piece) > 300}
    # About 105k tokens in parts of 4k: more requests than the default max_summary_calls.
    policy = POLICY.replace(min_recall=1.0, max_summary_calls=64)

    with recording_encodes() as encoded:
        result = compact_messages(history, policy, force=True, token_counts=counts)

    assert result.compacted
    assert any(event.phase == "summary_chunk" for event in result.events)  # parted
    long = [text for text in encoded if len(text) > 300]
    assert [text for text in long if any(piece in text for piece in stored)] == []


def _with_text(message: dict[str, Any], index: int) -> dict[str, Any]:
    """`message`, its tool calls said with some text first (as an agent often does)."""
    content = message["content"]
    if message["role"] != "assistant" or not any(b["type"] == "tool_use" for b in content):
        return message
    text = f"Step {index}: " + " ".join(WORDS[index % 9 :] * 6)
    return {**message, "content": [{"type": "text", "text": text}, *content]}


@settings(deadline=None, max_examples=40)
@given(
    identifiers=st.lists(
        st.text(st.sampled_from("ab/.- _\n1é"), min_size=1, max_size=30), max_size=150
    ),
    room=st.integers(0, 3000),
)
def test_the_identifiers_that_fit_are_those_counted_one_by_one(identifiers, room):
    fitting = 0
    left = room
    for identifier in identifiers:
        cost = count_text_tokens(f"- {identifier}\n") + 1
        if cost > left:
            break
        left -= cost
        fitting += 1

    assert _lines_within(identifiers, room, None) == fitting
