"""A stored session's compaction counts only new text (issue 14).

The per-message counts are cached in the database; compaction passes them to the engine,
so no stored message is encoded again: only the summary (and, with pruning, the messages
it rewrote) are counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compaction import ScriptedSummarizer
from compaction.carried_state import STATE_OPEN
from compaction.tokens import _message_pieces
from sessions_app.services.compacting.session_compaction import compact_session
from tests.support.encoded import recording_encodes
from tests.support.histories import synthetic_history

pytestmark = pytest.mark.django_db

SUMMARY = "Goals: finish the parser. Decisions: keep the old API."


def test_compaction_encodes_the_summary_but_no_stored_message(
    make_session: Any, make_profile: Callable[..., Any]
) -> None:
    history = synthetic_history(120, words_per_message=30)
    # Reads included: a file view's source is its result's text, counted with its message.
    profile = make_profile(steps=["summary"], context_limit=4000)
    session = make_session(messages=history, profile=profile)
    stored = {piece for m in history for piece in _message_pieces(m, "m")[0] if len(piece) > 20}
    with recording_encodes() as encoded:
        outcome = compact_session(
            session, profile=profile, summarizer=ScriptedSummarizer(default=SUMMARY)
        )

    assert outcome.compacted
    assert outcome.compaction is not None
    assert outcome.compaction.summary.startswith(f"{SUMMARY}\n\n{STATE_OPEN}\n")
    assert [text for text in encoded if text in stored] == []
    assert any(outcome.compaction.summary in text for text in encoded), "the summary, its block too"
    assert _containing(encoded, stored) == [], "no transcript of a stored message either"


def test_a_dry_run_preview_counts_no_stored_message(
    make_session: Any, make_profile: Callable[..., Any]
) -> None:
    history = synthetic_history(120, words_per_message=30)
    profile = make_profile(steps=["summary"], context_limit=4000)
    session = make_session(messages=history, profile=profile)
    stored = {piece for m in history for piece in _message_pieces(m, "m")[0] if len(piece) > 20}
    with recording_encodes() as encoded:
        outcome = compact_session(
            session, profile=profile, dry_run=True, summarizer=ScriptedSummarizer(default=SUMMARY)
        )

    assert outcome.preview is not None
    assert outcome.preview.partition is not None
    assert outcome.preview.summary is not None
    assert outcome.preview.summary.startswith(f"{SUMMARY}\n\n{STATE_OPEN}\n")
    parts = outcome.preview.partition
    assert [text for text in encoded if text in stored] == []
    assert _containing(encoded, stored) == []
    assert sum(part["tokens"] for part in parts.values()) == session.context_tokens
    assert all(part["tokens"] > 0 for part in parts.values() if part["messages"])


def _containing(encoded: list[str], stored: set[str]) -> list[str]:
    """The encoded texts that hold a long stored piece (a transcript line, say); the lines
    of a re-ask's identifier list (`- identifier`, new text) aside, and the summary's state
    block (new text, which quotes the first request whole)."""
    assert not any(STATE_OPEN in piece for piece in stored)  # no stored text is skipped
    long = [piece for piece in stored if len(piece) > 100]
    return [
        text
        for text in encoded
        if not text.startswith("- ")
        and STATE_OPEN not in text
        and any(piece in text for piece in long)
    ]
