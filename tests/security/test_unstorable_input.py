"""Lone surrogates, NaN/infinite numbers and absurd nesting never reach the database.

A JSON body with `"\\ud800"` decodes in Python into a lone surrogate: SQLite stored it, and
then the export, the session page, the context tab and every compaction of that session
failed for good; PostgreSQL answered an HTML 500. `1e400` parses as infinity (jsonb refuses
it), `NaN` is not JSON at all, and a 10,000-deep document exhausted the recursion limit.
The API refuses all of it (400 for what is not JSON, 422 naming each value's path);
importers clean what real transcripts hold (U+FFFD for a lone surrogate, null for NaN), as
they drop NUL characters.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.importers import parse_text
from sessions_app.models import Compaction, Message, Session
from sessions_app.services.importing import import_file
from sessions_app.unstorable import unstorable_problems

from .conftest import ApiClient, World

#: Raw JSON text holding a lone surrogate escape (json.dumps would write it the same way).
LONE = '"a\\ud800b"'
PAIR = '"a\\ud83d\\ude00b"'  # a valid pair: one emoji


def _post(client: ApiClient, path: str, raw: str) -> Any:
    return client.post(path, raw, content_type="application/json")


def _paths(response: Any, status: int = 422) -> list[str]:
    assert response.status_code == status, response.content[:400]
    return [problem["path"] for problem in response.json()["detail"]]


def _user(text: str) -> str:
    return '{"role": "user", "content": ' + text + "}"


def _blocks(text: str) -> str:
    return (
        '{"role": "user", "content": [{"type": "text", "text": "ok"}, '
        '{"type": "text", "text": ' + text + "}]}"
    )


CREATE_BODIES = [
    pytest.param('{"messages": [' + _blocks(LONE) + "]}", "messages[0].content[1].text", id="text"),
    pytest.param('{"title": ' + LONE + "}", "title", id="title"),
    pytest.param('{"system": ' + LONE + "}", "system", id="system"),
    pytest.param(
        '{"system": [{"type": "text", "text": ' + LONE + "}]}", "system[0].text", id="system-blocks"
    ),
    pytest.param('{"metadata": {"k": [1, ' + LONE + "]}}", "metadata.k[1]", id="metadata"),
    pytest.param('{"metadata": {"a\\udfffb": 1}}', "metadata.a\\udfffb", id="metadata-key"),
    pytest.param(
        '{"messages": [{"role": "user", "content": "hi", "note": ' + LONE + "}]}",
        "messages[0].note",
        id="extra-key",
    ),
    pytest.param('{"metadata": {"n": 1e400}}', "metadata.n", id="infinite-number"),
    pytest.param('{"metadata": {"n": -1e999}}', "metadata.n", id="minus-infinite-number"),
]


@pytest.mark.parametrize(("raw", "path"), CREATE_BODIES)
def test_creating_a_session_with_an_unstorable_value_is_422_naming_it(
    world: World, raw: str, path: str
) -> None:
    before = Session.objects.count()

    response = _post(world.as_alice, "/api/sessions", raw)

    assert path in _paths(response)
    assert Session.objects.count() == before


def test_a_valid_surrogate_pair_is_an_ordinary_character(world: World) -> None:
    response = _post(world.as_alice, "/api/sessions", '{"messages": [' + _user(PAIR) + "]}")

    assert response.status_code == 201, response.content[:300]
    stored = Message.objects.get(session_id=response.json()["id"])
    assert "\U0001f600" in json.dumps(stored.content, ensure_ascii=False)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_not_json(world: World, literal: str) -> None:
    response = _post(world.as_alice, "/api/sessions", '{"metadata": {"n": ' + literal + "}}")

    assert response.status_code == 400
    assert literal in response.json()["detail"]
    assert response.json()["detail"].startswith("malformed JSON body")


def test_appending_a_lone_surrogate_is_refused_and_changes_nothing(world: World) -> None:
    session = world.session
    before = (session.message_count, session.version)

    response = _post(
        world.as_alice,
        f"/api/sessions/{session.pk}/messages",
        '{"messages": [' + _blocks(LONE) + "]}",
    )

    assert _paths(response) == ["messages[0].content[1].text"]
    session.refresh_from_db()
    assert (session.message_count, session.version) == before


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param('{"summary": ' + LONE + "}", "summary", id="summary"),
        pytest.param('{"instructions": ' + LONE + "}", "instructions", id="instructions"),
    ],
)
def test_a_compaction_request_with_a_lone_surrogate_is_refused(
    world: World, raw: str, path: str
) -> None:
    before = Compaction.objects.count()

    response = _post(world.as_alice, f"/api/sessions/{world.session.pk}/compactions", raw)

    assert _paths(response) == [path]
    assert Compaction.objects.count() == before


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param('{"messages": [' + _blocks(LONE) + "]}", "messages[0].content[1].text"),
        pytest.param('{"messages": [], "system": ' + LONE + "}", "system"),
        pytest.param('{"messages": [], "instructions": ' + LONE + "}", "instructions"),
        pytest.param(
            '{"messages": [], "policy": {"context_limit": 1e400}}', "policy.context_limit"
        ),
    ],
)
def test_the_stateless_compact_refuses_unstorable_values(world: World, raw: str, path: str) -> None:
    assert _paths(_post(world.as_alice, "/api/compact", raw)) == [path]


def test_the_policy_of_the_stateless_compact_refuses_nan(world: World) -> None:
    response = _post(
        world.as_alice, "/api/compact", '{"messages": [], "policy": {"cooldown_seconds": NaN}}'
    )

    assert response.status_code == 400


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param('{"content": "x", "title": ' + LONE + "}", "title", id="title"),
        pytest.param('{"content": ' + LONE + "}", "content", id="content-text"),
        pytest.param(
            '{"content": {"messages": [' + _user(LONE) + "]}}",
            "content.messages[0].content",
            id="content-document",
        ),
    ],
)
def test_an_import_body_with_a_lone_surrogate_is_refused(world: World, raw: str, path: str) -> None:
    before = Session.objects.count()

    assert _paths(_post(world.as_alice, "/api/sessions/import", raw)) == [path]
    assert Session.objects.count() == before


# -- importers clean instead ------------------------------------------------------------------


def _claude_line(text: str) -> str:
    return '{"type": "user", "uuid": "u1", "message": {"role": "user", "content": ' + text + "}}"


def test_an_imported_lone_surrogate_becomes_a_replacement_character(world: World) -> None:
    response = world.as_alice.call(
        "POST", "/api/sessions/import", {"content": _claude_line(LONE), "format": "claude_code"}
    )

    assert response.status_code == 201, response.content[:300]
    session = Session.objects.get(pk=response.json()["session"]["id"])
    stored = json.dumps(Message.objects.get(session=session).content, ensure_ascii=False)
    assert "a\ufffdb" in stored
    # Everything that used to fail on such a session works.
    for url in ("", "/context", "/export", "/export?format=markdown&what=history"):
        assert world.as_alice.get(f"/api/sessions/{session.pk}{url}").status_code == 200, url


@pytest.mark.parametrize(
    ("text", "format"),
    [
        pytest.param(
            json.dumps(
                [{"role": "user", "content": "a\ud800b"}, {"role": "assistant", "content": "ok"}]
            ),
            "openai",
            id="json-document",
        ),
        pytest.param(_claude_line(LONE), "claude_code", id="json-lines"),
        pytest.param(
            '[{"role": "user", "content": "a", "score": NaN, "big": 1e400}]', "openai", id="nan"
        ),
    ],
)
def test_importers_clean_unstorable_values_and_keep_the_rest(text: str, format: str) -> None:
    imported = parse_text(text, format)

    history = list(imported.history())
    assert history
    assert unstorable_problems(history) == []


def test_a_ten_thousand_deep_import_is_422_not_a_crash(world: World) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    for chosen in ("openai", None):
        response = world.as_alice.call(
            "POST", "/api/sessions/import", {"content": deep, "format": chosen}
        )
        assert response.status_code == 422, response.content[:300]
        assert "nested deeper" in response.json()["detail"][0]["message"]


def test_a_deep_json_lines_record_is_skipped_and_the_rest_imported() -> None:
    lines = [_claude_line('"first"'), "[" * 5000 + "]" * 5000, _claude_line('"second"')]

    imported = parse_text("\n".join(lines), "claude_code")

    assert "first" in json.dumps(list(imported.history()))
    assert "second" in json.dumps(list(imported.history()))
    assert [s.line for s in imported.skipped] == [2]
    assert "nested deeper" in imported.skipped[0].reason


@pytest.mark.parametrize("depth", [200, 10_000])
def test_a_deeply_nested_body_is_400(world: World, depth: int) -> None:
    raw = '{"metadata": {"x": ' + "[" * depth + "]" * depth + "}}"

    response = _post(world.as_alice, "/api/sessions", raw)

    assert response.status_code == 400
    assert "nested deeper" in response.json()["detail"]


# -- file names -------------------------------------------------------------------------------


def test_an_upload_with_a_very_long_file_name_is_imported(world: World) -> None:
    name = "é" * 300 + ".jsonl"  # 600+ bytes: more than any file system allows in a name
    upload = SimpleUploadedFile(name, _claude_line('"hi"').encode(), "application/jsonl")

    response = world.as_alice.post("/api/sessions/import", {"file": upload})

    assert response.status_code == 201, response.content[:300]
    session = Session.objects.get(pk=response.json()["session"]["id"])
    stored = str(session.raw_source.name)
    assert stored.endswith(".jsonl")
    assert len(stored) <= 100
    assert session.raw_source.storage.exists(stored)


def test_import_file_with_a_thousand_character_name(world: World) -> None:
    report = import_file(world.alice, _claude_line('"hi"').encode(), name="n" * 1000 + ".jsonl")

    assert len(report.session.title) <= 300
    assert len(str(report.session.raw_source.name)) <= 100


def test_a_file_name_undecodable_as_utf8_is_imported(world: World, tmp_path: Path) -> None:
    # os.fsdecode gives such a name lone surrogates ("\udcff"): stored, they broke everything.
    raw_name = b"transcript-\xff.jsonl"
    path = Path(os.fsdecode(tmp_path)) / os.fsdecode(raw_name)
    try:
        path.write_text(_claude_line('"hi"'), encoding="utf-8")
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system cannot hold a name undecodable as UTF-8")

    report = import_file(world.alice, path)

    session = report.session
    assert unstorable_problems([session.title, session.metadata, session.raw_source.name]) == []
    assert session.metadata["import"]["source_name"] == "transcript-\ufffd.jsonl"
    assert str(session.raw_source.name).endswith("transcript-\ufffd.jsonl")
    assert world.as_alice.get(f"/api/sessions/{session.pk}/export").status_code == 200
