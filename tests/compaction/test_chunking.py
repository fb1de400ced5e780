"""Chunks of a middle for summarizer requests: tool pairs whole, every chunk under budget."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import transcript_costs
from compaction.chunking import (
    chunk_messages,
    cut_to_fit,
    fits,
    fits_costed,
    message_costs,
    tool_units,
)
from compaction.messages import (
    SUMMARY_KEY,
    SUMMARY_PREFIX,
    is_summary_message,
    make_summary_message,
    tool_result_ids,
    tool_use_ids,
)
from compaction.summarizers.prompt import serialize_transcript
from compaction.tokens import (
    compact_json,
    count_prefixed,
    count_text_tokens,
    message_token_counts,
)
from tests.support.encoded import recording_encodes
from tests.support.histories import (
    WORDS,
    assistant,
    exchange,
    histories,
    tool_call,
    tool_results,
    user,
)

CI = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def transcript_tokens(messages) -> int:
    return count_text_tokens(serialize_transcript(messages))


@CI
@given(histories(max_rounds=8), st.integers(60, 3000))
def test_chunks_keep_tool_pairs_and_fit_the_budget(messages, budget):
    chunks = chunk_messages(messages, budget)

    where: dict[str, int] = {}
    for number, chunk in enumerate(chunks):
        assert transcript_tokens(chunk.messages) <= budget
        assert sum(message_costs(chunk.messages)) <= budget or chunk.cut
        for message in chunk.messages:
            for tool_id in tool_use_ids(message):
                where[tool_id] = number
    for number, chunk in enumerate(chunks):
        for message in chunk.messages:
            for tool_id in tool_result_ids(message):
                assert where.get(tool_id, number) == number, f"{tool_id} split from its call"


@CI
@given(histories(max_rounds=8), st.integers(60, 3000))
def test_chunks_hold_the_messages_in_order_and_summaries_alone(messages, budget):
    chunks = chunk_messages(messages, budget)

    kept = [m for chunk in chunks if not chunk.cut for m in chunk.messages]
    positions = [next(i for i, o in enumerate(messages) if o is m) for m in kept]
    assert positions == sorted(positions)
    if not any(chunk.cut for chunk in chunks):
        assert [m for chunk in chunks for m in chunk.messages] == messages
    for chunk in chunks:
        if any(is_summary_message(m) for m in chunk.messages):
            assert chunk.summary
            assert len(chunk.messages) == 1


def test_tool_units_span_each_call_to_its_result():
    messages = [
        user("go"),
        *exchange("a", "Read"),
        assistant("now two at once"),
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "b", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "c", "name": "Bash", "input": {}},
            ],
        },
        tool_results(("b", "x"), ("c", "y")),
    ]

    assert [list(unit) for unit in tool_units(messages)] == [[0], [1, 2], [3], [4, 5]]


@CI
@given(
    st.lists(st.integers(0, 6000), min_size=1, max_size=4),
    st.integers(40, 2500),
)
def test_cut_to_fit_always_fits(sizes, budget):
    text = " ".join(f"w{i}" for i in range(max(sizes)))
    blocks = [
        {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": text[: size * 3]}}
        for n, size in enumerate(sizes)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"t{n}", "content": text[: size * 4]}
        for n, size in enumerate(sizes)
    ]
    unit = [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]

    cut = cut_to_fit(unit, budget)

    assert sum(message_costs(cut)) <= budget
    assert transcript_tokens(cut) <= budget


def test_a_cut_keeps_ids_names_head_tail_and_a_marker():
    log = " ".join(f"step{i}" for i in range(5000))
    unit = exchange("t1", "Bash", {"command": "make"}, log)

    cut = cut_to_fit(unit, 400)

    assert [tool_use_ids(m) for m in cut] == [["t1"], []]
    assert tool_result_ids(cut[1]) == ["t1"]
    result = cut[1]["content"][0]["content"]
    assert result.startswith("step0 step1")
    assert result.endswith("step4999")
    assert "[TRUNCATED original~" in result
    assert cut[0]["content"][0]["input"] == {"command": "make"}  # short strings stay whole
    assert unit[1]["content"][0]["content"] == log  # the original is untouched


def test_fits_is_exact_around_the_budget():
    messages = [user("alpha " * 300)]
    tokens = transcript_tokens(messages)

    assert fits(messages, tokens)
    assert not fits(messages, tokens - 1)


def test_fits_decides_by_utf8_bytes_not_characters():
    # A Gothic letter is one character, four UTF-8 bytes and four tokens: a check of
    # characters instead of bytes would call this transcript fitting under its tokens.
    messages = [user("\U00010348" * 40), user("é and 中 " * 10)]
    tokens = transcript_tokens(messages)

    assert fits(messages, tokens)
    assert not fits(messages, tokens - 1)
    assert not fits_costed(messages, tokens - 1)[0]


@CI
@given(histories(max_rounds=8), st.integers(1, 3000))
def test_fits_costed_agrees_with_fits_and_gives_the_costs_it_used(messages, budget):
    fitting, costs = fits_costed(messages, budget)

    assert fitting == fits(messages, budget)
    assert costs is None or costs == message_costs(messages)
    if costs is not None:  # what lets the exact count be skipped: costs bound the transcript
        assert transcript_tokens(messages) >= sum(costs) - 8 * len(costs)
        assert transcript_tokens(messages) <= sum(costs)


_PIECES = ["a", "B", "1", "22", " ", "  ", "\n", "\r\n", "\t", "(", ")", ":", "/", "'s", "é", "中"]
_TEXTS = st.lists(st.sampled_from([*_PIECES, "foo", "Bar", "\u0301", "-", "  x"]), max_size=30)


@settings(deadline=None)  # the first call loads the vocabulary
@given(prefix=st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), text=_TEXTS.map("".join))
def test_count_prefixed_is_the_count_of_the_joined_text(prefix: str, text: str) -> None:
    known = count_text_tokens(text)
    assert count_prefixed(prefix, text, known) == count_text_tokens(prefix + text)


@settings(deadline=None)
@given(texts=st.lists(_TEXTS.map("".join).filter(str.strip), min_size=1, max_size=6))
def test_costs_from_cached_counts_are_the_encoded_costs(texts: list[str]) -> None:
    messages: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        if index % 3 == 0:
            messages.append({"role": "user", "content": text})
        elif index % 3 == 1:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        else:
            result = {"type": "tool_result", "tool_use_id": f"t{index}", "content": text}
            messages.append({"role": "user", "content": [{**result, "is_error": index % 2 == 0}]})
    counts = message_token_counts(messages)
    assert message_costs(messages, counts=counts) == message_costs(messages)


_TEXT = _TEXTS.map("".join)
_BLOCKS = st.one_of(
    _TEXT.map(lambda text: {"type": "text", "text": text}),
    _TEXT.map(lambda text: {"type": "thinking", "thinking": text}),
    st.builds(
        lambda name, path, id_: {
            "type": "tool_use",
            "id": id_,
            "name": name,
            "input": {"file_path": path, "note": "x y"},
        },
        st.sampled_from(["Read", "", "multi word", "Bash"]),
        _TEXT,
        st.sampled_from(["t1", "toolu_01 x"]),
    ),
    st.builds(
        lambda text, error: {"type": "tool_result", "tool_use_id": "t1", "content": text, **error},
        _TEXT,
        st.sampled_from([{}, {"is_error": True}]),
    ),
    st.lists(
        st.one_of(
            _TEXT.map(lambda text: {"type": "text", "text": text}),
            st.just({"type": "image", "source": {"type": "base64", "data": "AAAA"}}),
            st.just({"type": "text"}),
        ),
        max_size=3,
    ).map(lambda items: {"type": "tool_result", "tool_use_id": "t2", "content": items}),
    st.just({"type": "image", "source": {"type": "base64", "data": "AAAA"}}),
    st.just({"type": "document", "source": {"type": "text", "data": "some text"}}),
    st.just({"type": "redacted_thinking", "data": "abc"}),
    st.just({"type": "tool_result", "tool_use_id": "t3"}),
)
_MESSAGES = st.one_of(
    st.builds(
        lambda role, text: {"role": role, "content": text}, st.sampled_from(["user", "x"]), _TEXT
    ),
    st.builds(
        lambda role, blocks: {"role": role, "content": blocks},
        st.sampled_from(["user", "assistant"]),
        st.lists(_BLOCKS, max_size=4),
    ),
    _TEXT.map(lambda text: {"role": "user", "content": f"{SUMMARY_PREFIX}{text}"}),
    _TEXT.map(lambda text: make_summary_message(text)),
    _TEXT.map(lambda text: {"role": "user", "content": text, SUMMARY_KEY: {}}),
)


@settings(deadline=None, max_examples=300)
@given(
    messages=st.lists(_MESSAGES, min_size=1, max_size=4),
    encoding=st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_costs_from_counts_are_exact_for_every_block_shape(
    messages: list[dict[str, Any]], encoding: str
) -> None:
    counts = message_token_counts(messages, encoding)
    assert message_costs(messages, encoding, counts) == message_costs(messages, encoding)


def test_costs_from_counts_encode_no_text_of_the_messages() -> None:
    # Texts long enough to hold many chunks: costing them from their counts encodes the
    # few chunks at each junction (a word or so), never a message's text.
    texts = [" ".join(WORDS[i % 7 :] * 20) for i in range(6)]
    messages: list[dict[str, Any]] = [
        user(texts[0]),
        tool_call("t1", text=texts[1], tool_input={"command": texts[2]}),
        tool_results(("t1", texts[3])),
        assistant(f"  {texts[4]}\n"),
        make_summary_message(texts[5]),
    ]
    counts = message_token_counts(messages)
    expected = message_costs(messages)
    transcript_costs._short_tokens.cache_clear()
    with recording_encodes() as encoded:
        assert message_costs(messages, counts=counts) == expected
    assert encoded, "the transcript's own text is encoded"
    assert max(len(text) for text in encoded) < 60
    assert sum(len(text) for text in encoded) < sum(len(text) for text in texts) / 20


_LONG_TEXT = st.lists(st.sampled_from([*_PIECES, "foo", "Bar", "\u0301", "-", "  x"]), max_size=90)


@settings(deadline=None, max_examples=200)
@given(
    text=_LONG_TEXT.map("".join),
    name=st.sampled_from(["Read", "", "two words"]),
    path=st.sampled_from(["a.py", "src/pkg/module_1.py", " x" * 30]),
    encoding=st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_costs_from_counts_are_exact_for_long_texts_and_calls(text, name, path, encoding):
    # The commonest shapes are costed without a layout: text then a tool call, a tool
    # result of text, a text alone.
    call = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {"file_path": path}}
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": [{"type": "text", "text": text}, call]},
        tool_results(("toolu_1", text)),
        tool_results(("toolu_1", text, True)),
        user(text),
        assistant(text),
    ]
    counts = message_token_counts(messages, encoding)
    assert message_costs(messages, encoding, counts) == message_costs(messages, encoding)


def _reference_units(messages: list[dict[str, Any]]) -> list[range]:
    """`tool_units` as first written: every message's ids, then the spans."""
    ids = [(tool_use_ids(m), tool_result_ids(m)) for m in messages]
    answered: dict[str, int] = {}
    for index, (_, results) in enumerate(ids):
        for tool_id in results:
            answered.setdefault(tool_id, index)
    units: list[range] = []
    start = end = 0
    for index, (uses, _) in enumerate(ids):
        if index > end:
            units.append(range(start, end + 1))
            start = end = index
        for tool_id in uses:
            end = max(end, answered.get(tool_id, index))
    if messages:
        units.append(range(start, end + 1))
    return units


@CI
@given(histories(max_rounds=6), st.randoms(use_true_random=False))
def test_tool_units_are_the_reference_spans_in_any_order(messages, random):
    assert tool_units(messages) == _reference_units(messages)
    random.shuffle(messages)  # results before their calls, calls never answered
    assert tool_units(messages) == _reference_units(messages)


_KEYS = st.text(
    st.sampled_from(["a", "B", "'", "_", "1", " ", '"', "\\", "é", "\n", "\x7f", "-"]), max_size=6
)


@CI
@given(st.dictionaries(_KEYS, st.text(max_size=8) | st.integers(), max_size=3))
def test_a_tool_input_head_ends_at_a_cut_of_its_compact_json(arguments):
    # Costing a tool call needs its input's JSON only up to a cut (any cut: the same cost).
    encoded = compact_json(arguments)
    head = transcript_costs._arguments_head(arguments)
    if head:
        assert encoded.startswith(head)
        assert transcript_costs._FIRST_CUT.match(encoded, len(head)) is not None
    else:
        assert transcript_costs._first_cut(encoded, 0, len(encoded)) < 0
