"""The Claude Code importer: threads, forks and rewinds, merged responses, compactions,
subagents, titles and corrupt lines."""

from __future__ import annotations

import json
from pathlib import Path

from compaction import SUMMARY_KEY, blocks_of, validate_messages
from sessions_app.importers import NO_RESULT_TEXT, ImportedSession, parse, parse_text
from tests.sessions_app.transcripts import (
    SESSION,
    boundary,
    cc_assistant,
    cc_user,
    compact_summary,
    jsonl,
    preserved_session_lines,
    text,
    tool_result,
    tool_use,
)


def _texts(session: ImportedSession) -> list[str]:
    return [
        " | ".join(str(b.get("text") or b.get("type")) for b in blocks_of(m))
        for m in session.history()
    ]


def _valid(session: ImportedSession) -> None:
    assert validate_messages(list(session.history())) == []
    assert validate_messages(session.context_messages()) == []


def test_lines_of_one_response_become_one_message_with_usage_once() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "list files"),
            cc_assistant(
                "a1",
                "u1",
                [{"type": "thinking", "thinking": "hm", "signature": "s"}],
                "m1",
                usage={"input_tokens": 10, "output_tokens": 1},
            ),
            cc_assistant(
                "a2", "a1", [text("Listing.")], "m1", usage={"input_tokens": 10, "output_tokens": 3}
            ),
            cc_assistant(
                "a3", "a2", [tool_use("t1")], "m1", usage={"input_tokens": 10, "output_tokens": 9}
            ),
            cc_user("r1", "a3", [tool_result("t1", "a.txt")], toolUseResult={"stdout": "a.txt"}),
        )
    )
    reply = session.messages[1]
    assert [b["type"] for b in blocks_of(reply.message)] == ["thinking", "text", "tool_use"]
    assert reply.usage == {"input_tokens": 10, "output_tokens": 9}
    assert reply.original_id == "m1"
    assert reply.extra["uuids"] == ["a1", "a2", "a3"]
    assert session.messages[2].extra["tool_use_results"] == {"t1": {"stdout": "a.txt"}}
    assert session.counts()["messages"] == 3
    _valid(session)


def test_parallel_tool_calls_are_not_forks() -> None:
    # Results are parented to the assistant line of their own call: the graph forks, the
    # conversation does not.
    session = parse_text(
        jsonl(
            cc_user("u1", None, "go"),
            cc_assistant("a1", "u1", [tool_use("t1")], "m1"),
            cc_assistant("a2", "a1", [tool_use("t2")], "m1"),
            cc_user("r2", "a2", [tool_result("t2", "two")]),
            cc_user("r1", "a1", [tool_result("t1", "one")]),
            cc_assistant("a3", "r1", [text("done")], "m2"),
        )
    )
    assert session.metadata["abandoned_lines"] == 0
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant"]
    results = blocks_of(session.messages[2].message)
    assert [b["tool_use_id"] for b in results] == ["t2", "t1"]
    assert not any(b.get("ctxweb_synthetic") for b in results)
    _valid(session)


def test_streamed_results_between_lines_of_one_response() -> None:
    # Claude Code runs a tool while the response still streams: a result line can come
    # between two assistant lines of the same message.id.
    session = parse_text(
        jsonl(
            cc_user("u1", None, "go"),
            cc_assistant("a1", "u1", [tool_use("t1")], "m1"),
            cc_user("r1", "a1", [tool_result("t1")]),
            cc_assistant("a2", "r1", [tool_use("t2")], "m1"),
            cc_user("r2", "a2", [tool_result("t2")]),
        )
    )
    assert [m.role for m in session.messages] == ["user", "assistant", "user"]
    assert len(blocks_of(session.messages[1].message)) == 2
    _valid(session)


def test_rewind_keeps_the_newest_branch() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "start"),
            cc_assistant("a1", "u1", [text("ready")], "m1"),
            cc_user("u2", "a1", "first try"),
            cc_assistant("a2", "u2", [text("first answer")], "m2"),
            cc_user("u3", "a1", "second try"),
            cc_assistant("a3", "u3", [text("second answer")], "m3"),
        )
    )
    assert _texts(session) == ["start", "ready", "second try", "second answer"]
    assert session.metadata["abandoned_lines"] == 2
    assert session.kept_raw == 2
    assert session.metadata["kept_raw_types"] == {"abandoned_branch": 2}


def test_rewind_winner_is_the_branch_with_the_newest_message() -> None:
    # The second branch was tried, then the user resumed the first one: the branch holding
    # the newest message wins, not simply the later child.
    session = parse_text(
        jsonl(
            cc_user("u1", None, "start"),
            cc_assistant("a1", "u1", [text("ready")], "m1"),
            cc_user("u2", "a1", "branch A"),
            cc_user("u3", "a1", "branch B"),
            cc_assistant("a2", "u2", [text("answer A")], "m2"),
        )
    )
    assert _texts(session) == ["start", "ready", "branch A", "answer A"]


def test_regenerated_reply_keeps_the_newest() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "hi"),
            cc_assistant("a1", "u1", [text("old reply")], "m1"),
            cc_assistant("a2", "u1", [text("new reply")], "m2"),
        )
    )
    assert _texts(session) == ["hi", "new reply"]


def test_is_meta_thinking_and_tool_data_are_kept() -> None:
    session = parse_text(
        jsonl(
            cc_user("u0", None, "<local-command-caveat>caveat</local-command-caveat>", isMeta=True),
            cc_user("u1", "u0", "do it"),
            cc_assistant(
                "a1",
                "u1",
                [{"type": "thinking", "thinking": "plan", "signature": "sig"}, tool_use("t1")],
                "m1",
            ),
            cc_user(
                "r1",
                "a1",
                [tool_result("t1", [text("out")])],
                toolUseResult={"stdout": "out", "code": 0},
            ),
        )
    )
    assert session.messages[0].message["is_meta"] is True
    assert "is_meta" not in session.messages[1].message
    assert blocks_of(session.messages[2].message)[0] == {
        "type": "thinking",
        "thinking": "plan",
        "signature": "sig",
    }
    assert session.messages[3].extra["tool_use_results"]["t1"] == {"stdout": "out", "code": 0}
    assert session.title == "do it"  # the first real prompt, not the meta line


def test_unanswered_tool_call_gets_a_marked_synthetic_result() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "go"),
            cc_assistant("a1", "u1", [tool_use("t1"), tool_use("t2")], "m1"),
            cc_user("r1", "a1", [tool_result("t1")]),
            cc_user("u2", "r1", "[Request interrupted by user]"),
        )
    )
    answer = blocks_of(session.messages[2].message)
    assert answer[0]["tool_use_id"] == "t1"
    assert answer[1] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": NO_RESULT_TEXT,
        "is_error": True,
        "ctxweb_synthetic": True,
    }
    assert answer[2]["text"] == "[Request interrupted by user]"  # merged: calls were pending
    assert session.counts()["synthetic_results"] == 1
    _valid(session)


def test_trailing_tool_call_is_answered_at_the_end() -> None:
    session = parse_text(
        jsonl(cc_user("u1", None, "go"), cc_assistant("a1", "u1", [tool_use("t1")], "m1"))
    )
    assert session.messages[-1].extra["ctxweb_synthetic"] is True
    _valid(session)


def test_compaction_boundary_and_summary_become_a_compaction_point() -> None:
    summary = [text("Summary: the user listed files.")]
    session = parse_text(
        jsonl(
            cc_user("u1", None, "list"),
            cc_assistant("a1", "u1", [text("done")], "m1"),
            boundary("b1", "a1", postTokens=120),
            compact_summary("s1", "b1", summary),
            cc_user("u2", "s1", "next"),
            cc_assistant("a2", "u2", [text("ok")], "m2"),
        )
    )
    (compaction,) = session.compactions
    assert (compaction.first_index, compaction.last_index) == (0, 1)
    assert compaction.trigger == "manual"
    assert (compaction.pre_tokens, compaction.post_tokens) == (1000, 120)
    assert compaction.summary == "Summary: the user listed files."
    assert compaction.raw["logicalParentUuid"] == "a1"
    assert compaction.original_id == "b1"
    context = session.context_messages()
    assert context[0]["content"] == summary  # what Claude Code put in its context
    assert context[0][SUMMARY_KEY]["imported"] is True
    assert [m["content"] for m in context[1:]] == ["next", [text("ok")]]
    assert session.counts()["messages"] == 4  # the summary line is the compaction's, not history
    _valid(session)


def test_second_compaction_absorbs_the_first() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "one"),
            cc_assistant("a1", "u1", [text("1")], "m1"),
            boundary("b1", "a1"),
            compact_summary("s1", "b1", "first summary"),
            cc_user("u2", "s1", "two"),
            cc_assistant("a2", "u2", [text("2")], "m2"),
            boundary("b2", "a2", trigger="auto"),
            compact_summary("s2", "b2", "second summary"),
            cc_user("u3", "s2", "three"),
        )
    )
    first, second = session.compactions
    assert (first.first_index, first.last_index, first.absorbed_by) == (0, 1, 1)
    assert (second.first_index, second.last_index, second.absorbed_by) == (0, 3, None)
    assert second.trigger == "auto"
    assert [(c.kind, c.index) for c in session.context] == [("summary", 1), ("message", 4)]


def test_summary_without_a_boundary_is_an_imported_compaction() -> None:
    # Older Claude Code started a new file with the summary after /compact.
    session = parse_text(
        jsonl(compact_summary("s1", None, "what happened before"), cc_user("u1", "s1", "go on"))
    )
    (compaction,) = session.compactions
    assert compaction.summary == "what happened before"
    assert compaction.first_index is None
    assert [c.kind for c in session.context] == ["summary", "message"]


def test_boundary_without_summary_gets_the_no_summary_marker() -> None:
    session = parse_text(
        jsonl(cc_user("u1", None, "a"), boundary("b1", "u1"), cc_user("u2", "b1", "b"))
    )
    assert session.compactions[0].summary.startswith("[ctxweb:")
    _valid(session)


def test_title_comes_from_custom_title_then_summary_then_first_prompt() -> None:
    base = [cc_user("u1", None, "the first prompt")]
    assert parse_text(jsonl(*base)).title == "the first prompt"
    summary = {"type": "summary", "summary": "Fixing the parser", "leafUuid": "u1"}
    assert parse_text(jsonl(summary, *base)).title == "Fixing the parser"
    custom = {"type": "custom-title", "customTitle": "My name", "sessionId": SESSION}
    assert parse_text(jsonl(summary, custom, *base)).title == "My name"


def test_corrupt_lines_are_reported_and_the_rest_imported() -> None:
    good = jsonl(cc_user("u1", None, "hi"), cc_assistant("a1", "u1", [text("hello")], "m1"))
    truncated = json.dumps(cc_user("u2", "a1", "cut off"))[:40]
    data = (
        good
        + "{not json}\n"
        + "[1, 2]\n"
        + json.dumps({"type": "user", "uuid": "x"})
        + "\n"
        + truncated
    )
    session = parse_text(data)
    assert [s.line for s in session.skipped] == [3, 4, 5, 6]
    assert "invalid JSON" in session.skipped[0].reason or "JSON" in session.skipped[0].reason
    assert session.skipped[1].reason == "not a JSON object"
    assert "without a message" in session.skipped[2].reason
    assert "truncated" in session.skipped[3].reason
    assert session.skipped_count == 4
    assert _texts(session) == ["hi", "hello"]


def test_invalid_utf8_line_is_skipped() -> None:
    data = jsonl(cc_user("u1", None, "hi")).encode() + b'{"type": "user", "x": "\xff"}\n'
    session = parse(data)
    assert session.skipped[0].line == 2
    assert "UTF-8" in session.skipped[0].reason


def test_unknown_and_bookkeeping_lines_are_kept_raw_and_counted() -> None:
    session = parse_text(
        jsonl(
            {"type": "permission-mode", "permissionMode": "plan", "sessionId": SESSION},
            {"type": "future-line", "sessionId": SESSION},
            {
                "type": "attachment",
                "uuid": "at1",
                "parentUuid": None,
                "attachment": {"type": "hook_success"},
            },
            cc_user("u1", "at1", "hi"),
            {"type": "progress", "uuid": "p1", "parentUuid": "u1", "data": {}},
        )
    )
    assert session.kept_raw == 4
    assert session.metadata["kept_raw_types"] == {
        "attachment/hook_success": 1,
        "future-line": 1,
        "permission-mode": 1,
        "progress": 1,
    }
    assert _texts(session) == ["hi"]


def test_empty_content_becomes_a_marked_placeholder() -> None:
    session = parse_text(jsonl(cc_user("u1", None, "   "), cc_assistant("a1", "u1", [], "m1")))
    assert session.messages[0].message["content"].startswith("[ctxweb:")
    assert session.messages[0].extra["ctxweb_placeholder"] is True
    assert blocks_of(session.messages[1].message)[0]["text"].startswith("[ctxweb:")
    _valid(session)


def test_unsupported_blocks_are_kept_aside() -> None:
    odd = {"type": "server_tool_use", "id": "x", "name": "web_search", "input": {}}
    session = parse_text(
        jsonl(cc_user("u1", None, "hi"), cc_assistant("a1", "u1", [text("a"), odd], "m1"))
    )
    reply = session.messages[1]
    assert blocks_of(reply.message) == [text("a")]
    assert reply.extra["unsupported_blocks"] == [{"index": 1, "block": odd}]


def test_inline_sidechain_is_a_subagent_linked_to_its_task_call() -> None:
    task = tool_use("task1", "Task", prompt="Find the bug", description="find")
    session = parse_text(
        jsonl(
            cc_user("u1", None, "help"),
            cc_assistant("a1", "u1", [task], "m1"),
            cc_user("s1", None, "Find the bug", isSidechain=True),
            cc_assistant("s2", "s1", [text("found it")], "m9", isSidechain=True),
            cc_user("r1", "a1", [tool_result("task1", "it was X")]),
        )
    )
    assert _texts(session) == ["help", "tool_use", "tool_result"]
    (child,) = session.subagents
    assert child.parent_tool_use_id == "task1"
    assert _texts(child) == ["Find the bug", "found it"]
    assert child.metadata["inline_sidechain"] is True


def _write(path: Path, *records: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(jsonl(*records))
    return path


def test_subagent_files_are_found_and_linked(tmp_path: Path) -> None:
    main = _write(
        tmp_path / f"{SESSION}.jsonl",
        cc_user("u1", None, "delegate"),
        cc_assistant(
            "a1", "u1", [tool_use("call-x", "Agent", prompt="x", description="Do x")], "m1"
        ),
        cc_user(
            "r1",
            "a1",
            [tool_result("call-x", "x done")],
            toolUseResult={"agentId": "x1", "status": "completed"},
        ),
    )
    agents = tmp_path / SESSION / "subagents"
    _write(
        agents / "agent-x1.jsonl",
        cc_user("x-u1", None, "x", isSidechain=True, agentId="x1"),
        cc_assistant(
            "x-a1",
            "x-u1",
            [tool_use("call-y", "Agent", prompt="y")],
            "mx",
            isSidechain=True,
            agentId="x1",
        ),
        cc_user(
            "x-r1",
            "x-a1",
            [tool_result("call-y", "agentId: y2 (use SendMessage to continue)")],
            isSidechain=True,
            agentId="x1",
        ),
    )
    (agents / "agent-x1.meta.json").write_text(
        json.dumps({"agentType": "general", "description": "Do x"})
    )
    _write(agents / "agent-y2.jsonl", cc_user("y-u1", None, "y", isSidechain=True, agentId="y2"))
    _write(agents / "agent-z3.jsonl", cc_user("z-u1", None, "z", isSidechain=True, agentId="z3"))
    other = {**cc_user("o1", None, "other session"), "sessionId": "someone-else"}
    _write(tmp_path / "agent-old.jsonl", other)

    session = parse(main)
    by_id = {child.external_id: child for child in session.subagents}
    assert set(by_id) == {"x1", "z3"}  # y2 hangs under x1; z3 is unlinked; agent-old is not ours
    x1 = by_id["x1"]
    assert x1.parent_tool_use_id == "call-x"
    assert x1.title == "Do x"
    assert x1.metadata["agent"]["agentType"] == "general"
    (y2,) = x1.subagents
    assert (y2.external_id, y2.parent_tool_use_id) == ("y2", "call-y")
    assert by_id["z3"].parent_tool_use_id == ""
    assert parse(main, subagents=False).subagents == []


def test_legacy_agent_files_beside_the_session(tmp_path: Path) -> None:
    main = _write(tmp_path / f"{SESSION}.jsonl", cc_user("u1", None, "hi"))
    _write(tmp_path / "agent-abc.jsonl", cc_user("x", None, "sub", isSidechain=True, agentId="abc"))
    (child,) = parse(main).subagents
    assert child.external_id == "abc"


def test_preserved_segment_stays_in_the_context_after_the_summary() -> None:
    session = parse_text(preserved_session_lines())
    (compaction,) = session.compactions
    assert (compaction.first_index, compaction.last_index, compaction.at_message) == (0, 1, 4)
    assert [(c.kind, c.index) for c in session.context] == [
        ("summary", 0),
        ("message", 2),
        ("message", 3),
        ("message", 4),
    ]
    _valid(session)


def test_unresolvable_preserved_segment_keeps_nothing() -> None:
    session = parse_text(
        jsonl(
            cc_user("u1", None, "one"),
            boundary("b1", "u1", preservedSegment={"headUuid": "nope", "tailUuid": "u1"}),
            cc_user("u2", "b1", "two"),
        )
    )
    assert (session.compactions[0].first_index, session.compactions[0].last_index) == (0, 0)
