"""`POST /api/sessions/import` (multipart or JSON) and `GET /api/sessions/{id}/export`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.test.client import MULTIPART_CONTENT

from sessions_app.importers import parse_text
from sessions_app.models import Session
from tests.sessions_app import samples
from tests.sessions_app.samples import WORKTREES
from tests.sessions_app.transcripts import cc_assistant, cc_user, jsonl, text

pytestmark = pytest.mark.django_db

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "Hello."},
]


@pytest.fixture
def samples_dir() -> Path:
    return samples.samples_dir()


def _upload(client: Any, data: bytes, name: str, **fields: str) -> Any:
    upload = io.BytesIO(data)
    upload.name = name
    return client.post(
        "/api/sessions/import", {"file": upload, **fields}, content_type=MULTIPART_CONTENT
    )


def test_import_a_multipart_upload(api_client: Any, user: Any, samples_dir: Path) -> None:
    data = (samples_dir / "cclog_dag_compact_after_rewind.synthetic.jsonl").read_bytes()
    response = _upload(api_client, data, "rewind.jsonl", title="Rewind demo")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["source_format"] == "claude_code"
    assert body["source_name"] == "rewind.jsonl"
    assert body["counts"]["messages"] == 8
    assert body["counts"]["compactions"] == 1
    assert body["session"]["title"] == "Rewind demo"
    assert body["session"]["compaction_count"] == 1
    session = Session.objects.get(pk=body["session_id"])
    assert session.owner == user
    assert str(session.raw_source.name).endswith("rewind.jsonl")


def test_import_json_content_with_a_format(api_client: Any) -> None:
    response = api_client.post("/api/sessions/import", {"format": "openai", "content": CHAT})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["source_format"] == "openai"
    assert body["counts"]["messages"] == 3
    text_content = api_client.post("/api/sessions/import", {"content": json.dumps(CHAT)})
    assert text_content.json()["source_format"] == "openai"  # detected


def test_import_reports_skipped_lines(api_client: Any) -> None:
    content = (
        jsonl(cc_user("u1", None, "hi"), cc_assistant("a1", "u1", [text("yo")], "m1")) + "{bad\n"
    )
    body = api_client.post("/api/sessions/import", {"content": content}).json()
    assert body["skipped_count"] == 1
    assert body["skipped"][0]["line"] == 3


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"content": "not a transcript"}, "content"),
        ({"content": ""}, "content"),
        ({"text": "x"}, "content"),
        ({"content": "[]", "format": "yaml"}, "format"),
        ({"content": "[]", "format": "claude"}, "format"),  # the API takes canonical names
        ({"content": None, "format": "claude_code"}, "content"),
        ({"content": json.dumps(CHAT), "title": {}}, "title"),
        ({"content": '{"type": "summary", "summary": "only a title"}'}, "content"),
    ],
)
def test_import_errors_name_the_field(api_client: Any, payload: dict[str, Any], path: str) -> None:
    response = api_client.post("/api/sessions/import", payload)
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == path
    assert Session.objects.count() == 0


def test_import_needs_a_file_or_json(api_client: Any) -> None:
    response = api_client.post(
        "/api/sessions/import", {"other": "x"}, content_type=MULTIPART_CONTENT
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "file"
    malformed = api_client.post("/api/sessions/import", "{oops", content_type="application/json")
    assert malformed.status_code == 400


def test_import_needs_authentication(anon_client: Any) -> None:
    response = anon_client.post("/api/sessions/import", {"content": json.dumps(CHAT)})
    assert response.status_code == 401


def test_subagents_come_back_as_their_own_sessions(api_client: Any, samples_dir: Path) -> None:
    # An upload has no folder beside it: only inline subagents can be found.
    data = (samples_dir / "agentsessions_claude_small.coverage.jsonl").read_bytes()
    body = _upload(api_client, data, "coverage.jsonl").json()
    assert len(body["session_ids"]) == 2
    child = Session.objects.get(pk=body["session_ids"][1])
    assert str(child.parent_id) == body["session_id"]


def _imported(client: Any) -> str:
    response = client.post("/api/sessions/import", {"format": "openai", "content": CHAT})
    return str(response.json()["session_id"])


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_export_round_trips(api_client: Any, fmt: str) -> None:
    session_id = _imported(api_client)
    response = api_client.get(f"/api/sessions/{session_id}/export?format={fmt}")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert f"-context.{fmt}.json" in response["Content-Disposition"]
    again = parse_text(response.content.decode(), fmt)
    assert [(m["role"], m["content"]) for m in again.history()] == [
        (m["role"], m["content"]) for m in CHAT
    ]


def test_export_history_as_markdown(api_client: Any, samples_dir: Path) -> None:
    data = (samples_dir / "cclog_dag_compact_after_rewind.synthetic.jsonl").read_bytes()
    session_id = _upload(api_client, data, "rewind.jsonl").json()["session_id"]
    history = api_client.get(f"/api/sessions/{session_id}/export?format=markdown&what=history")
    assert history["Content-Type"].startswith("text/markdown")
    assert "_8 messages_" in history.content.decode()
    context = api_client.get(f"/api/sessions/{session_id}/export?format=markdown")
    text_body = context.content.decode()
    assert "_3 messages_" in text_body
    assert "## 1. Summary of earlier conversation" in text_body


def test_export_of_another_owners_session_is_404(api_client: Any, other_client: Any) -> None:
    session_id = _imported(api_client)
    assert other_client.get(f"/api/sessions/{session_id}/export").status_code == 404
    assert api_client.get("/api/sessions/not-a-uuid/export").status_code == 404


def test_export_rejects_unknown_formats(api_client: Any) -> None:
    session_id = _imported(api_client)
    response = api_client.get(f"/api/sessions/{session_id}/export?format=yaml")
    assert response.status_code == 422
    assert api_client.get(f"/api/sessions/{session_id}/export?what=everything").status_code == 422


def test_worktrees_upload_imports_the_main_session(api_client: Any, samples_dir: Path) -> None:
    body = _upload(api_client, (samples_dir / WORKTREES).read_bytes(), "main.jsonl").json()
    assert body["counts"]["tool_calls"] == 40
    assert body["counts"]["subagents"] == 0  # their files were not uploaded
