"""`tool_result_text`: the one extractor of a tool result's text, for the engine and web app."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import compaction
from compaction import tool_result_text
from compaction.messages import message_text

IMAGE = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
DOCUMENT = {"type": "document", "source": {"type": "text", "data": "d"}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _kind(block: Mapping[str, Any]) -> str:
    return f"[{block.get('type')}]"


def test_it_is_exported() -> None:
    assert "tool_result_text" in compaction.__all__


def test_a_string_is_its_own_text() -> None:
    assert tool_result_text("s") == "s"
    assert tool_result_text("") == ""


def test_text_blocks_are_joined_by_newlines_and_other_blocks_skipped() -> None:
    content = [_text("a"), IMAGE, _text("b")]
    assert tool_result_text(content) == "a\nb"


def test_render_gives_the_text_of_other_blocks() -> None:
    content = [_text("a"), IMAGE, DOCUMENT, _text("b")]
    assert tool_result_text(content, _kind) == "a\n[image]\n[document]\nb"


def test_render_returning_none_skips_the_block() -> None:
    content = [_text("a"), IMAGE, DOCUMENT]
    rendered = tool_result_text(content, lambda b: "pic" if b["type"] == "image" else None)
    assert rendered == "a\npic"


def test_render_is_not_asked_about_text_blocks() -> None:
    asked: list[str] = []

    def render(block: Mapping[str, Any]) -> str:
        asked.append(str(block.get("type")))
        return "x"

    tool_result_text([_text("a"), IMAGE], render)
    assert asked == ["image"]


def test_missing_text_and_odd_items_give_nothing() -> None:
    assert tool_result_text([{"type": "text"}, {"type": "text", "text": None}]) == "\n"
    assert tool_result_text(["bare", 3, None, _text("a")]) == "a"
    assert tool_result_text(None) == ""
    assert tool_result_text({"type": "text", "text": "not a list"}) == ""
    assert tool_result_text(7) == ""


def test_message_text_reads_results_through_it() -> None:
    content = [_text("a"), IMAGE, _text("b")]
    result = {"type": "tool_result", "tool_use_id": "t", "content": content}
    message = {"role": "user", "content": [result]}
    assert message_text(message) == tool_result_text(content) == "a\nb"


_TEXTS = st.text(max_size=20)
_BLOCKS = st.one_of(
    _TEXTS.map(_text),
    st.just(IMAGE),
    st.just(DOCUMENT),
)


@given(st.lists(_BLOCKS, max_size=8))
def test_texts_keep_their_order_and_nothing_else_is_added(content: list[dict[str, Any]]) -> None:
    texts = [b["text"] for b in content if b["type"] == "text"]
    assert tool_result_text(content) == "\n".join(texts)


@given(st.lists(_BLOCKS, max_size=8))
def test_with_render_every_block_gives_one_part(content: list[dict[str, Any]]) -> None:
    parts = [b["text"] if b["type"] == "text" else _kind(b) for b in content]
    assert tool_result_text(content, _kind) == "\n".join(parts)


@given(_TEXTS)
def test_one_text_block_reads_as_its_string(text: str) -> None:
    assert tool_result_text([_text(text)]) == tool_result_text(text) == text
