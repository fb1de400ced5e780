"""SessionBuilder invariants: whatever the source sends, history and context stay valid and
no tool call or result is lost; the message log spills to disk and reads back the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import blocks_of, validate_messages
from sessions_app.importers import ImportedMessage
from sessions_app.importers.builder import SessionBuilder
from sessions_app.importers.messagelog import MessageLog

IDS = st.sampled_from(["a", "b", "c", None])
TEXT = st.sampled_from(["", "  ", "hello", "x"])


def _block(role: str) -> st.SearchStrategy[dict[str, Any]]:
    text = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
    use = st.builds(lambda i: {"type": "tool_use", "id": i, "name": "t", "input": {}}, IDS)
    result = st.builds(lambda i: {"type": "tool_result", "tool_use_id": i, "content": "r"}, IDS)
    odd = st.just({"type": "mystery", "value": 1})
    return st.one_of(text, use, result, odd)


EVENT = st.one_of(
    st.tuples(
        st.sampled_from(["user", "assistant", "system", "developer"]),
        st.lists(_block("any"), max_size=4),
    ),
    st.tuples(st.sampled_from(["user", "assistant"]), TEXT),
    st.just(("compaction", None)),
    st.tuples(st.just("rollback"), st.integers(0, 3)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENT, max_size=25))
def test_any_stream_gives_a_valid_history_and_context(events: list[tuple[str, Any]]) -> None:
    builder = SessionBuilder("anthropic")
    uses_in = results_in = 0
    for role, content in events:
        if role == "compaction":
            builder.mark_compaction(summary="s")
        elif role == "rollback":
            builder.rollback_turns(content)
        else:
            if isinstance(content, list):
                uses_in += sum(b["type"] == "tool_use" for b in content if role == "assistant")
                results_in += sum(b["type"] == "tool_result" for b in content if role == "user")
            builder.add(ImportedMessage(message={"role": role, "content": content}))
    session = builder.finish()
    history = list(session.history())
    assert validate_messages(history) == []
    assert validate_messages(session.context_messages()) == []
    blocks = [b for m in history for b in blocks_of(m)]
    assert sum(b["type"] == "tool_use" for b in blocks) == uses_in  # never dropped
    real = sum(b["type"] == "tool_result" and not b.get("ctxweb_synthetic") for b in blocks)
    orphans = sum(len(m.extra.get("orphan_results", [])) for m in session.messages)
    assert real + orphans == results_in  # answered, or kept as marked text
    for compaction in session.compactions[:-1]:
        assert compaction.absorbed_by is not None


def test_leading_system_messages_stay_ahead_of_a_compaction() -> None:
    builder = SessionBuilder("openai")
    builder.add(ImportedMessage(message={"role": "system", "content": "rules"}))
    builder.add(ImportedMessage(message={"role": "user", "content": "hi"}))
    compaction = builder.mark_compaction(summary="said hi")
    builder.add(ImportedMessage(message={"role": "user", "content": "again"}))
    session = builder.finish()
    assert (compaction.first_index, compaction.last_index) == (1, 1)
    assert [(c.kind, c.index) for c in session.context] == [
        ("message", 0),
        ("summary", 0),
        ("message", 2),
    ]


def test_skips_are_counted_beyond_the_listed_ones() -> None:
    builder = SessionBuilder("codex")
    for line in range(1, 1206):
        builder.skip(line, "bad")
    session = builder.finish()
    assert session.skipped_count == 1205
    assert len(session.skipped) == 1000


def test_message_log_spills_to_a_file_and_reads_back() -> None:
    log = MessageLog(memory_messages=3)
    when = datetime(2025, 1, 1, tzinfo=UTC)
    items = [
        ImportedMessage(
            message={"role": "user", "content": f"m{i}"},
            created_at=when if i % 2 else None,
            original_id=str(i),
            usage={"n": i},
            extra={"i": i},
        )
        for i in range(6)
    ]
    for item in items:
        log.append(item)
    assert log.spilled
    assert len(log) == 6
    assert [m.message["content"] for m in log] == [f"m{i}" for i in range(6)]
    assert log[-1].extra == {"i": 5}
    assert log[1].created_at == when
    assert log[0].created_at is None
    assert [m.original_id for m in log[2:4]] == ["2", "3"]
    log.close()
    assert len(log) == 0


def test_message_log_spills_on_size() -> None:
    log = MessageLog(memory_bytes=10)
    log.append(ImportedMessage(message={"role": "user", "content": "x"}), size_hint=11)
    assert log.spilled
    assert log[0].message["content"] == "x"
