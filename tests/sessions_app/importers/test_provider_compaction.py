"""Compactions the provider made: Anthropic `compaction` blocks, OpenAI compaction items."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction import SUMMARY_KEY, blocks_of, validate_messages
from sessions_app.importers import ImportedSession, parse_text
from tests.sessions_app.transcripts import SESSION, cc_assistant, cc_user, jsonl, text

SUMMARY = "The user asked for a refactor; files a.py and b.py were changed."
BLOCK = {"type": "compaction", "content": SUMMARY, "encrypted_content": "E" * 40}
OPAQUE = "[opaque compaction by the provider: encrypted, 12 chars]"


def _valid(session: ImportedSession) -> None:
    assert validate_messages(list(session.history())) == []
    assert validate_messages(session.context_messages()) == []


def _texts(session: ImportedSession) -> list[str]:
    return [
        " | ".join(str(b.get("text") or b.get("type")) for b in blocks_of(m))
        for m in session.context_messages()
    ]


def _anthropic(*messages: dict[str, Any]) -> ImportedSession:
    return parse_text(json.dumps({"system": "terse", "messages": list(messages)}))


def test_anthropic_compaction_block_is_a_compaction_point_with_its_summary() -> None:
    session = _anthropic(
        {"role": "user", "content": "refactor please"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": "and now?"},
        {
            "role": "assistant",
            "content": [BLOCK, {"type": "text", "text": "next step"}],
            "usage": {"input_tokens": 9, "output_tokens": 2},
        },
        {"role": "user", "content": "thanks"},
    )
    assert session.source_format == "anthropic"
    [point] = session.compactions
    assert point.summary == SUMMARY
    assert point.trigger == "provider"
    assert (point.first_index, point.last_index) == (1, 3)  # after the system prompt
    assert point.raw["provider"] == "anthropic"
    assert point.raw["encrypted_chars"] == 40
    assert point.raw["block"]["encrypted_content"] == "E" * 40
    # The history keeps every message; the compaction block itself is not a content block.
    roles = ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m.role for m in session.messages] == roles
    assert session.messages[4].usage == {"input_tokens": 9, "output_tokens": 2}
    context = session.context_messages()
    assert context[1][SUMMARY_KEY]["trigger"] == "provider"
    assert _texts(session) == ["terse", SUMMARY, "next step", "thanks"]
    _valid(session)


def test_compaction_block_in_the_middle_splits_the_message() -> None:
    session = _anthropic(
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "before"},
                BLOCK,
                {"type": "text", "text": "after"},
            ],
            "usage": {"output_tokens": 3},
        },
    )
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "assistant"]
    assert session.messages[2].usage is None  # usage once, on the last piece
    assert session.messages[3].usage == {"output_tokens": 3}
    assert session.compactions[0].summary == SUMMARY
    assert session.compactions[0].last_index == 2
    assert _texts(session)[-1] == "after"


def test_a_message_made_only_of_a_compaction_block_is_only_the_point() -> None:
    session = _anthropic(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "compaction", "encrypted_content": "x" * 12}]},
        {"role": "user", "content": "more"},
    )
    assert [m.role for m in session.messages] == ["system", "user", "user"]
    assert session.compactions[0].summary == OPAQUE  # no readable content: opaque
    assert session.compactions[0].raw["opaque"] is True


def test_claude_code_assistant_line_with_a_compaction_block() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "hi"),
            cc_assistant("a1", "u1", [text("hello")], "m1"),
            cc_user("u2", "a1", "work"),
            cc_assistant("a2", "u2", [BLOCK, text("continuing")], "m2"),
        )
    )
    assert session.source_format == "claude_code"
    [point] = session.compactions
    assert point.summary == SUMMARY
    assert (point.first_index, point.last_index) == (0, 2)
    assert _texts(session) == [SUMMARY, "continuing"]
    _valid(session)


# -- OpenAI Responses -------------------------------------------------------------------------


def _codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-09-01T10:00:00.000Z", "type": kind, "payload": payload}


def _codex_message(role: str, value: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return _codex_line(
        "response_item",
        {"type": "message", "role": role, "content": [{"type": kind, "text": value}]},
    )


COMPACTION_ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "z" * 12}


def test_codex_compaction_item_is_an_opaque_compaction_point() -> None:
    session = parse_text(
        jsonl(
            _codex_line("session_meta", {"id": "rollout-1"}),
            _codex_message("user", "hi"),
            _codex_message("assistant", "hello"),
            _codex_line("response_item", COMPACTION_ITEM),
            _codex_message("user", "go on"),
        )
    )
    assert session.source_format == "codex"
    [point] = session.compactions
    assert point.summary == OPAQUE
    assert point.trigger == "provider"
    assert point.original_id == "cmp_1"
    assert point.raw["provider"] == "openai"
    assert point.created_at is not None
    assert _texts(session) == [OPAQUE, "go on"]
    _valid(session)


def test_codex_compacted_line_after_the_item_is_the_same_compaction() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "compaction_summary", "encrypted_content": "z" * 12},
    ]
    session = parse_text(
        jsonl(
            _codex_message("user", "hi"),
            _codex_message("assistant", "hello"),
            _codex_line("response_item", COMPACTION_ITEM),
            _codex_line("compacted", {"message": "", "replacement_history": history}),
            _codex_message("user", "go on"),
        )
    )
    [point] = session.compactions
    assert point.summary == OPAQUE
    assert OPAQUE in str(point.context_content)  # the replacement history names it too
    assert "compacted" in point.raw
    _valid(session)


def test_openai_responses_items_with_a_compaction() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        COMPACTION_ITEM,
        {"role": "user", "content": "go on"},
    ]
    session = parse_text(json.dumps(items))
    assert session.source_format == "openai"
    assert session.skipped_count == 0
    [point] = session.compactions
    assert point.summary == OPAQUE
    assert _texts(session) == [OPAQUE, "go on"]
    _valid(session)


# -- stored --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_stored_claude_code_2_1_transcript(user: Any) -> None:
    from sessions_app.models import Compaction, Session
    from sessions_app.services.importing import import_file

    data = jsonl(
        cc_user("u1", None, "hi"),
        cc_assistant("a1", "u1", [text("hello")], "m1"),
        {"type": "cost-state", "sessionId": SESSION, "totalCostUSD": 0.5, "modelUsage": {}},
        {"type": "api-request", "sessionId": SESSION, "id": "r", "params": {"model": "m"}},
        cc_user("u2", "a1", "work", timestamp="2025-07-01T11:00:00.000Z"),
        cc_assistant(
            "a2", "u2", [BLOCK, text("continuing")], "m2", timestamp="2025-07-01T12:00:00.000Z"
        ),
    )
    session = import_file(user, data.encode(), name="cc21.jsonl").session
    stored = Compaction.objects.get(session=session)
    assert stored.summary == SUMMARY
    assert stored.trigger == Compaction.Trigger.IMPORTED
    session = Session.objects.get(pk=session.pk)
    assert session.metadata["cost"]["totalCostUSD"] == 0.5
    assert session.metadata["record_types"]["api-request"] == 1
    assert session.metadata["import"]["kept_raw"] == 2
    # The session's times are the transcript's, not the import's.
    assert session.created_at.isoformat() == "2025-07-01T10:00:00+00:00"
    assert session.updated_at.isoformat() == "2025-07-01T12:00:00+00:00"


def test_codex_remote_compaction_without_a_message_is_opaque() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "compaction", "encrypted_content": "z" * 12},
    ]
    session = parse_text(
        jsonl(
            _codex_message("user", "hi"),
            _codex_message("assistant", "hello"),
            _codex_line("compacted", {"message": "", "replacement_history": history}),
            _codex_message("user", "go on"),
        )
    )
    [point] = session.compactions
    assert point.summary == OPAQUE
    assert point.trigger == "provider"
    assert point.context_content[0]["text"].startswith("[user]\nhi")  # the history is kept
    _valid(session)


@pytest.mark.django_db
def test_watched_transcript_gets_the_provider_marker_as_it_arrives(
    user: Any, tmp_path: Any
) -> None:
    from sessions_app.models import Compaction, Message, Session
    from sessions_app.services.importing.watching import Watcher

    records: list[dict[str, Any]] = [
        cc_user("u1", None, "hi"),
        cc_assistant("a1", "u1", [text("hello")], "m1"),
        {"type": "api-request", "sessionId": SESSION, "id": "r", "params": {"model": "m"}},
        cc_user("u2", "a1", "work"),
        cc_assistant("a2", "u2", [BLOCK, text("continuing")], "m2"),
        {"type": "cost-state", "sessionId": SESSION, "totalCostUSD": 0.5},
        cc_user("u3", "a2", "thanks"),
    ]
    target = tmp_path / "watched" / "s.jsonl"
    target.parent.mkdir()
    target.touch()
    watcher = Watcher(user, [target.parent])
    counts = []
    for record in records:
        with open(target, "a", encoding="utf-8") as file:
            file.write(jsonl(record))
        watcher.scan()
        session = Session.objects.filter(source_path=str(target)).first()
        counts.append(session.compaction_count if session else 0)
    assert counts == [0, 0, 0, 0, 1, 1, 1]
    session = Session.objects.get(source_path=str(target))
    assert Message.objects.filter(session=session).count() == 5
    assert Compaction.objects.get(session=session).summary == SUMMARY
    assert session.metadata["cost"]["totalCostUSD"] == 0.5


@pytest.mark.django_db
@pytest.mark.parametrize("summary", ["", "The user said hi."])
@pytest.mark.parametrize("split", [3, 4])
def test_a_codex_compaction_item_and_its_compacted_line_in_two_scans_are_one_marker(
    user: Any, tmp_path: Any, split: int, summary: str
) -> None:
    """The rollout is written in two parts, scanned after each: the item and its `compacted`
    line (the same compaction) make one marker, as when the file is read in one go."""
    from sessions_app.models import Compaction, Session
    from sessions_app.services.importing.watching import Watcher

    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "compaction_summary", "encrypted_content": "z" * 12},
    ]
    lines = [
        jsonl(record)
        for record in (
            _codex_line("session_meta", {"id": "rollout-2"}),
            _codex_message("user", "hi"),
            _codex_message("assistant", "hello"),
            _codex_line("response_item", COMPACTION_ITEM),
            _codex_line("compacted", {"message": summary, "replacement_history": history}),
            _codex_message("user", "go on"),
            _codex_message("assistant", "going on"),
        )
    ]
    target = tmp_path / "watched" / "rollout.jsonl"
    target.parent.mkdir()
    watcher = Watcher(user, [target.parent])
    target.write_text("".join(lines[: split + 1]), encoding="utf-8")
    first = watcher.scan()
    with open(target, "a", encoding="utf-8") as file:
        file.write("".join(lines[split + 1 :]))
    second = watcher.scan()

    session = Session.objects.get(source_path=str(target))
    [marker] = Compaction.objects.filter(session=session)
    assert session.compaction_count == 1
    assert marker.summary == (summary or OPAQUE)
    assert "compacted" in marker.details["source"]  # the line's data joined the item's
    assert sum(sync.compactions for sync in (*first, *second)) == 1
