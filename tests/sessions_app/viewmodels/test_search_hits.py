"""The search hits' shaping (issue 29 item 6): a snippet cut at its highlights loses and
adds nothing; hits group by session in the order of their newest hit; binary detection
never refuses text."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from sessions_app.selectors.search import SearchHit
from sessions_app.services.importing.binary import HEAD_BYTES, binary_kind
from sessions_app.viewmodels.search import group_hits, snippet_parts

spans = st.lists(st.tuples(st.integers(-5, 80), st.integers(-5, 80)), max_size=6)


@given(st.text(max_size=60), spans)
def test_a_snippet_cut_at_its_highlights_is_the_snippet(
    snippet: str, highlights: list[tuple[int, int]]
) -> None:
    parts = snippet_parts(snippet, highlights)
    assert "".join(part.text for part in parts) == snippet
    marked = [part.text for part in parts if part.match]
    valid = [snippet[a:b] for a, b in sorted(highlights) if 0 <= a < b <= len(snippet)]
    assert all(text in valid for text in marked)
    assert all(part.text for part in parts)  # no empty run


def hit(session: str, index: int) -> SearchHit:
    return SearchHit(
        session_id=session,
        session_title=f"title {session}",
        message_index=index,
        role="user",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        compaction=None,
        snippet="src/app.py",
        highlights=((0, 3),),
    )


def test_hits_group_by_session_in_the_order_of_their_newest_hit() -> None:
    a, b, c = (str(uuid.UUID(int=n)) for n in (1, 2, 3))
    groups = group_hits([hit(b, 9), hit(a, 8), hit(b, 3), hit(c, 2), hit(a, 1)])
    assert [(g.session_id, [h.message_index for h in g.hits]) for g in groups] == [
        (b, [9, 3]),
        (a, [8, 1]),
        (c, [2]),
    ]
    assert groups[0].hits[0].url == f"/sessions/{b}/?tab=history&at=9"


@given(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
        max_size=3000,
    )
)
def test_text_is_never_taken_for_a_binary_file(text: str) -> None:
    head = text.encode("utf-8")[:HEAD_BYTES]
    # Only a text that starts like a known file signature is one.
    signatures = (b"GIF87a", b"GIF89a", b"BZh", b"RIFF", b"%PDF", b"PK\x03\x04", b"\x7fELF")
    assert binary_kind(head) is None or head.startswith(signatures)
