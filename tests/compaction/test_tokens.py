"""count_tokens (docs/behaviour.md#token-counting): offline tiktoken, block rules, per-message
counts."""

from __future__ import annotations

import json
import logging
import socket
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import tiktoken
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from compaction import count_tokens, get_encoding, message_token_counts, message_tokens, tokens
from compaction.errors import UnknownEncodingError
from compaction.tokens import (
    ENCODINGS,
    IMAGE_TOKENS,
    count_text_tokens,
)
from tests.support.encoded import recording_encodes
from tests.support.histories import assistant, exchange, synthetic_history, user

TEXT = "The quick brown fox jumps over the lazy dog; naïve café — 東京 🚀"


def raw(text: str, encoding: str = "o200k_base") -> int:
    return len(get_encoding(encoding).encode_ordinary(text))


def test_empty_list_is_zero():
    assert count_tokens([]) == 0


def test_empty_string_content_is_zero():
    assert count_tokens([{"role": "user", "content": ""}]) == 0
    assert count_text_tokens("") == 0


def test_string_content_is_its_encoding():
    assert count_tokens([user(TEXT)]) == raw(TEXT)


def test_text_blocks_are_summed():
    message = {
        "role": "user",
        "content": [{"type": "text", "text": "a b"}, {"type": "text", "text": TEXT}],
    }

    assert count_tokens([message]) == raw("a b") + raw(TEXT)


def test_tool_use_counts_its_name_and_compact_json_input():
    tool_input = {"file_path": "src/app.py", "lines": [1, 2], "note": "café"}
    message = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": tool_input}],
    }

    compact = json.dumps(tool_input, ensure_ascii=False, separators=(",", ":"))
    assert count_tokens([message]) == raw("Read") + raw(compact)


def test_tool_result_is_counted_recursively():
    nested = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "plain"},
            {
                "type": "tool_result",
                "tool_use_id": "u",
                "content": [{"type": "text", "text": TEXT}, {"type": "text", "text": "more"}],
            },
        ],
    }

    assert count_tokens([nested]) == raw("plain") + raw(TEXT) + raw("more")


def test_thinking_and_redacted_thinking_count():
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": TEXT, "signature": "sig"},
            {"type": "redacted_thinking", "data": "abc"},
        ],
    }

    assert count_tokens([message]) == raw(TEXT) + raw("abc")


def test_images_and_binary_documents_have_a_fixed_estimate():
    message = {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
            {"type": "document", "source": {"type": "base64", "data": "AAAA"}},
            {"type": "document", "source": {"type": "text", "data": TEXT}},
        ],
    }

    assert count_tokens([message]) == 2 * IMAGE_TOKENS + raw(TEXT)


def test_unknown_blocks_are_skipped_with_a_warning(caplog):
    message = {"role": "user", "content": [{"type": "hologram"}, {"type": "text", "text": "x"}]}

    with caplog.at_level(logging.WARNING, logger="compaction"):
        assert count_tokens([message]) == raw("x")

    assert "hologram" in caplog.text


def test_a_huge_message_is_counted_normally():
    text = "word " * 120_000

    assert count_tokens([user(text)]) == raw(text) > 100_000


def test_per_message_counts_sum_to_the_total():
    messages = synthetic_history(60)

    counts = message_token_counts(messages)

    assert len(counts) == len(messages)
    assert sum(counts) == count_tokens(messages)
    assert counts == [message_tokens(m) for m in messages]


def test_cl100k_is_selectable_and_counts_differently():
    messages = [user(TEXT * 20), *exchange("t1", result=TEXT * 10), assistant(TEXT)]

    o200k = count_tokens(messages)
    cl100k = count_tokens(messages, encoding="cl100k_base")

    assert cl100k == sum(message_token_counts(messages, "cl100k_base"))
    assert cl100k != o200k
    assert get_encoding().name == "o200k_base"
    assert get_encoding("cl100k_base").name == "cl100k_base"


def test_unknown_encoding_is_a_named_error():
    with pytest.raises(UnknownEncodingError, match="known: cl100k_base, o200k_base"):
        count_tokens([user("x")], encoding="p50k_base")


@pytest.fixture
def vocabulary_dir(tmp_path):
    """A fresh vocabulary folder set through `configure`, restored afterwards."""
    tokens.configure(tiktoken_dir=tmp_path)
    get_encoding.cache_clear()
    yield tmp_path
    tokens.configure(tiktoken_dir=None)
    get_encoding.cache_clear()


def test_vocabularies_load_without_network(vocabulary_dir, monkeypatch):
    tmp_path = vocabulary_dir

    def no_network(*args, **kwargs):
        raise AssertionError("tried to reach the network")

    real_read_file = tiktoken.load.read_file

    def local_only(path):
        if "://" in path:
            no_network()
        return real_read_file(path)

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(tiktoken.load, "read_file", local_only)
    get_encoding.cache_clear()
    try:
        encoding = get_encoding("cl100k_base")
        assert len(encoding.encode_ordinary("hello world")) == 2
        assert (tmp_path / "cl100k_base.tiktoken").exists()
    finally:
        get_encoding.cache_clear()


def test_a_corrupted_vocabulary_fails_the_hash_check(vocabulary_dir):
    (vocabulary_dir / "cl100k_base.tiktoken").write_bytes(b"aGVsbG8= 0\n")
    with pytest.raises(ValueError, match=r"[Hh]ash"):
        get_encoding("cl100k_base")


def test_the_vocabulary_folder_is_a_parameter_not_the_environment(tmp_path, monkeypatch):
    # Issue 14: the engine reads no application setting; the web app passes its own.
    monkeypatch.setenv("CTXWEB_TIKTOKEN_DIR", str(tmp_path / "from-env"))
    get_encoding.cache_clear()
    try:
        tokens.configure(tiktoken_dir=tmp_path / "configured")
        assert get_encoding("cl100k_base").encode_ordinary("hi")
        assert (tmp_path / "configured" / "cl100k_base.tiktoken").exists()
        assert not (tmp_path / "from-env").exists()
        tokens.configure(tiktoken_dir=None)
        get_encoding.cache_clear()
        get_encoding("cl100k_base")
        assert not (tmp_path / "from-env").exists()
        assert (Path(tempfile.gettempdir()) / "ctxweb-tiktoken" / "cl100k_base.tiktoken").exists()
    finally:
        tokens.configure(tiktoken_dir=None)
        get_encoding.cache_clear()


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_offline_encodings_match_tiktokens_own_definitions(name):
    # tiktoken's constructor, with its loader patched here only, is the reference.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", tokens._offline_load):
        spec = getattr(openai_public, name)()
    reference = tiktoken.Encoding(**spec)
    encoding = get_encoding(name)

    assert encoding.name == spec["name"]
    assert encoding._pat_str == spec["pat_str"]
    assert encoding._special_tokens == spec["special_tokens"]
    assert encoding.n_vocab == reference.n_vocab
    sample = "Hello, wörld! 12345 don't\n\n  <|endoftext|> 中文 def f(x): return x**2"
    assert encoding.encode_ordinary(sample) == reference.encode_ordinary(sample)
    assert encoding.encode(sample, allowed_special="all") == reference.encode(
        sample, allowed_special="all"
    )


def test_offline_encodings_use_tiktokens_file_names_and_hashes():
    asked = {}

    def record(url, expected_hash=None):
        asked[url.rsplit("/", 1)[-1]] = expected_hash
        return {}

    with mock.patch.object(openai_public, "load_tiktoken_bpe", record):
        for name in ENCODINGS:
            getattr(openai_public, name)()

    assert {s.file_name: s.expected_hash for s in ENCODINGS.values()} == asked


_texts = st.text(max_size=40)
_leaf_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _texts),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, _texts),
    st.builds(lambda t: {"type": "redacted_thinking", "data": t}, _texts),
    st.builds(
        lambda n, v: {"type": "tool_use", "id": "t", "name": n, "input": {"v": v}}, _texts, _texts
    ),
    st.just({"type": "image", "source": {"type": "base64", "data": "AA"}}),
    st.builds(lambda t: {"type": "document", "source": {"type": "text", "data": t}}, _texts),
)
_result_blocks = st.builds(
    lambda c: {"type": "tool_result", "tool_use_id": "t", "content": c},
    st.one_of(_texts, st.lists(_leaf_blocks, max_size=3)),
)
_messages = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant", "system"]),
    st.one_of(_texts, st.lists(st.one_of(_leaf_blocks, _result_blocks), max_size=4)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_messages, max_size=5))
def test_the_fast_count_equals_encoding_every_piece(messages):
    # The counting loop takes shortcuts for common shapes; the pieces are the definition.
    encode = get_encoding().encode_ordinary
    expected = []
    for message in messages:
        pieces, fixed = tokens._message_pieces(message, "m")
        expected.append(fixed + sum(len(encode(piece)) for piece in pieces))

    assert message_token_counts(messages) == expected
    assert [message_tokens(m) for m in messages] == expected


def test_count_text_tokens_each_counts_every_string():
    texts = ["", TEXT, "a b c", TEXT * 3]

    assert tokens.count_text_tokens_each(texts) == [raw(t) for t in texts]


# The counter: bpe-openai's figures must be tiktoken's (docs/behaviour.md#token-counting).
_unicode = st.text(st.characters(codec="utf-8"), max_size=200)
_shaped = st.lists(
    st.sampled_from(
        [
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            "'s",
            "'LL",
            "a",
            "Zx",
            "123",
            "4567",
            "é",
            "中文",
            "🙂",
            "👍🏽",
            "\u200d",
            "ـ",
            "١٢",
            ".",
            "://",
            "--",
            "\u00a0",
            "\u3000",
            "x\u0301",
        ]
    ),
    max_size=80,
).map("".join)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@settings(max_examples=300, deadline=None)
@given(text=st.one_of(_unicode, _shaped))
def test_text_counter_gives_tiktokens_figure(name, text):
    assert tokens.text_counter(name)(text) == len(get_encoding(name).encode_ordinary(text))


@pytest.mark.parametrize("text", [" " * 5000, "\n" * 999 + "x", "1" * 10001, "word " * 20000])
def test_text_counter_gives_tiktokens_figure_on_long_runs(text):
    assert tokens.text_counter()(text) == len(get_encoding().encode_ordinary(text))


def test_text_counter_counts_lone_surrogates_as_tiktoken_does():
    text = "a\ud800b \udfff"

    assert tokens.text_counter()(text) == len(get_encoding().encode_ordinary(text))


@pytest.fixture
def counting_spy(monkeypatch):
    """The number of tiktoken encode_ordinary calls made by counters built from now on."""
    calls = []
    original = tiktoken.Encoding.encode_ordinary

    def spy(self, text):
        calls.append(text)
        return original(self, text)

    monkeypatch.setattr(tiktoken.Encoding, "encode_ordinary", spy)
    tokens._counter.cache_clear()
    yield calls
    tokens.configure()
    tokens._counter.cache_clear()


def test_counting_builds_no_token_list(counting_spy):
    expected = raw(TEXT)
    counting_spy.clear()

    assert tokens.count_text_tokens(TEXT) == expected
    assert counting_spy == []


def test_fast_counting_can_be_turned_off(counting_spy):
    expected = raw(TEXT)
    counting_spy.clear()
    tokens.configure(fast_counting=False)

    assert tokens.count_text_tokens(TEXT) == expected
    assert counting_spy == [TEXT]


def test_a_long_text_that_comes_back_is_encoded_once_per_count():
    # A file read again comes back as the same text: counted once, the same count each time.
    source = "\n".join(f"def function_{n}(value):\n    return value * {n}" for n in range(60))
    history = [user("read it"), *exchange("t1", "Read", {"file_path": "a.py"}, source)]
    history += exchange("t2", "Read", {"file_path": "a.py"}, source)
    with recording_encodes() as encoded:
        counts = message_token_counts(history)

    assert encoded.count(source) == 1
    assert counts[2] == counts[4] == count_text_tokens(source)
