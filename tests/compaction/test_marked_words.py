"""`marked_words`: the words holding a `/` or a `.`, split once per text within a run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compaction import marked_words as module
from compaction.marked_words import marked_words, words_remembered

_TEXTS = st.lists(
    st.sampled_from(["a", "b.py", "src/x", ".", "/", " ", "\n", "\u00a0", "end.", "\t"]),
    max_size=12,
).map("".join)


@given(_TEXTS)
def test_marked_words_are_the_split_words_with_a_slash_or_a_dot(text: str) -> None:
    expected = [word for word in text.split() if "/" in word or "." in word]
    assert marked_words(text) == expected
    with words_remembered():
        assert marked_words(text) == expected
        assert marked_words(text) == expected  # remembered


def test_texts_are_remembered_within_the_block_only() -> None:
    text = "see src/app.py and docs/x.md"
    assert module._REMEMBERED.get() is None
    with words_remembered():
        assert marked_words(text) == ["src/app.py", "docs/x.md"]
        remembered = module._REMEMBERED.get()
        assert remembered == {text: "src/app.py docs/x.md"}
        remembered[text] = "changed"  # what is remembered is what a second call gives
        assert marked_words(text) == ["changed"]
    assert module._REMEMBERED.get() is None
    assert marked_words(text) == ["src/app.py", "docs/x.md"]  # nothing kept after the block
