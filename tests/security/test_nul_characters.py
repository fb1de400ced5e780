"""A NUL character (U+0000) in any text the API stores is refused with a 422 naming the
field, never a 500; the importers drop it instead.

PostgreSQL cannot store U+0000 in text or jsonb (SQLite can), so on PostgreSQL such input
used to reach the database and fail there. Refusing it the same way on every database keeps
the API portable: a body that works on SQLite works on PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction import ScriptedSummarizer, SummaryError
from sessions_app.importers import parse_text
from sessions_app.models import Compaction, Message, Session
from sessions_app.nul import first_nul_path
from sessions_app.services.compacting.session_compaction import compact_session

from .conftest import World

NUL = "before\x00after"


def _messages(text: str = "hello", tool_id: str = "toolu_1") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"c": text}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": text}]},
    ]


def _nul_problem_paths(response: Any) -> list[str]:
    """The field paths a 422 body blames, each for a NUL character."""
    problems = response.json()["detail"]
    assert all("NUL" in problem["message"] for problem in problems), problems
    return [problem["path"] for problem in problems]


CREATE_BODIES = [
    pytest.param({"title": NUL}, "title", id="title"),
    pytest.param({"messages": _messages(text=NUL)}, "messages[0].content", id="message-text"),
    pytest.param(
        {"messages": _messages(tool_id="toolu_\x00")}, "messages[1].content[0].id", id="tool-use-id"
    ),
    pytest.param({"system": NUL}, "system", id="system"),
    pytest.param({"system": [{"type": "text", "text": NUL}]}, "system[0].text", id="system-blocks"),
    pytest.param({"metadata": {"k": [NUL]}}, "metadata.k[0]", id="metadata"),
    pytest.param(
        {"messages": [{"role": "user", "content": "hi", "note\x00": 1}]},
        "messages[0].note\\u0000",
        id="extra-key",
    ),
]


@pytest.mark.parametrize(("body", "path"), CREATE_BODIES)
def test_creating_a_session_with_a_nul_character_is_refused(
    world: World, body: Any, path: str
) -> None:
    before = Session.objects.count()

    response = world.as_alice.call("POST", "/api/sessions", body)

    assert response.status_code == 422, response.content[:300]
    problems = response.json()["detail"]
    assert path in [problem["path"] for problem in problems]
    assert all("NUL" in problem["message"] for problem in problems)
    assert Session.objects.count() == before


def test_appending_a_nul_character_is_refused_and_changes_nothing(world: World) -> None:
    before = world.as_alice.get(f"/api/sessions/{world.session.pk}").json()["message_count"]

    response = world.as_alice.call(
        "POST",
        f"/api/sessions/{world.session.pk}/messages",
        {"messages": [{"role": "user", "content": NUL}]},
    )

    assert response.status_code == 422, response.content[:300]
    assert _nul_problem_paths(response) == ["messages[0].content"]
    after = world.as_alice.get(f"/api/sessions/{world.session.pk}").json()["message_count"]
    assert after == before


@pytest.mark.parametrize("field", ["summary", "instructions"])
def test_a_compaction_request_with_a_nul_character_is_refused(world: World, field: str) -> None:
    before = Compaction.objects.count()

    response = world.as_alice.call(
        "POST", f"/api/sessions/{world.session.pk}/compactions", {field: NUL}
    )

    assert response.status_code == 422, response.content[:300]
    assert _nul_problem_paths(response) == [field]
    assert Compaction.objects.count() == before


def test_an_imported_nul_character_is_dropped_and_the_rest_kept(world: World) -> None:
    content = '{"type": "user", "message": {"role": "user", "content": "a\\u0000b"}, "uuid": "u"}'

    response = world.as_alice.call(
        "POST", "/api/sessions/import", {"content": content, "format": "claude_code"}
    )

    assert response.status_code == 201, response.content[:300]
    stored = Message.objects.get(session_id=response.json()["session"]["id"])
    assert stored.content in ("ab", [{"type": "text", "text": "ab"}])


def test_an_import_title_with_a_nul_character_is_refused(world: World) -> None:
    content = '{"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u"}'

    response = world.as_alice.call(
        "POST", "/api/sessions/import", {"content": content, "title": NUL}
    )

    assert response.status_code == 422, response.content[:300]
    assert response.json()["detail"][0]["path"] == "title"


def test_a_failed_compaction_with_nul_instructions_is_recorded_without_them(
    world: World,
) -> None:
    failing = ScriptedSummarizer(default=SummaryError("api_error", "529 overloaded"))

    outcome = compact_session(world.session, instructions=NUL, summarizer=failing)

    assert outcome.failed
    assert outcome.compaction is not None
    outcome.compaction.refresh_from_db()
    assert outcome.compaction.instructions == "beforeafter"


_CHAT_WITH_NUL = [
    {"role": "user", "content": "a\u0000b"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                # An argument string that is itself JSON holding an escaped NUL.
                "function": {"name": "bash", "arguments": '{"command": "x\\u0000y"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "out\u0000put"},
    {"role": "assistant", "content": "done"},
]


@pytest.mark.parametrize(
    ("text", "format"),
    [
        pytest.param(json.dumps(_CHAT_WITH_NUL), "openai", id="json-document"),
        pytest.param(
            '{"type": "user", "message": {"role": "user", "content": "a\\u0000b"}, "uuid": "u"}',
            "claude_code",
            id="json-lines",
        ),
    ],
)
def test_importers_drop_nul_characters_and_keep_the_text(text: str, format: str) -> None:
    imported = parse_text(text, format)

    history = list(imported.history())
    assert first_nul_path(history) is None
    assert "ab" in json.dumps(history)
