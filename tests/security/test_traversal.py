"""Path traversal: hostile ids and file names write nothing outside the data directory.

The storage root lives at `<tmp>/sentinel/data/blobs`; after each attack no file may appear
anywhere under `<tmp>` outside `<tmp>/sentinel/data`, and reads through crafted names
never return a file from outside the session's own folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from sessions_app.models import Session

from .conftest import BIG_RESULT, ApiClient, World, files_under

TRAVERSAL_IDS = [
    "../../../../escape",
    "..\\..\\..\\escape",
    "/tmp/ctxweb-absolute-escape",
    "....//....//escape",
    "%2e%2e%2f%2e%2e%2fescape",
    "..%2F..%2Fescape",
    "./../../escape",
    "a/../../../../escape",
    "C:\\Windows\\escape",
]  # NUL characters: tests/security/test_nul_characters.py

TRAVERSAL_NAMES = [
    "../../etc/passwd",
    "../../../sentinel-escape.jsonl",
    "..\\..\\sentinel-escape.jsonl",
    "/etc/passwd",
    "....//....//sentinel-escape",
]


@pytest.fixture
def outside(tmp_path: Path, data_dir: Path) -> set[Path]:
    """The files under the test's tmp folder but outside the data dir, before the attack."""
    return _outside(tmp_path, data_dir)


def _outside(tmp_path: Path, data_dir: Path) -> set[Path]:
    return {path for path in files_under(tmp_path) if data_dir not in path.parents}


def _session_with_tool_id(client: ApiClient, tool_use_id: str) -> str:
    messages = [
        {"role": "user", "content": "read the big log"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": tool_use_id, "name": "Bash", "input": {"command": "cat"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": BIG_RESULT}],
        },
        {"role": "assistant", "content": "done"},
    ]
    response = client.call("POST", "/api/sessions", {"messages": messages})
    assert response.status_code == 201, response.content[:500]
    return str(response.json()["id"])


@pytest.mark.parametrize("tool_use_id", TRAVERSAL_IDS)
def test_offloading_a_hostile_tool_use_id_stays_in_the_data_dir(
    world: World, tmp_path: Path, data_dir: Path, outside: set[Path], tool_use_id: str
) -> None:
    client = world.as_alice
    session_id = _session_with_tool_id(client, tool_use_id)

    response = client.call("POST", f"/api/sessions/{session_id}/offload", {"min_chars": 10})

    assert response.status_code == 200, response.content[:500]
    assert response.json()["offloaded_count"] == 1
    assert _outside(tmp_path, data_dir) == outside
    assert not Path("/tmp/ctxweb-absolute-escape").exists()
    session_folder = data_dir / "blobs" / "offload" / session_id
    written = files_under(session_folder)
    assert len(written) == 1, "the offloaded file is in the session's own folder"
    assert next(iter(written)).read_text() == BIG_RESULT


@pytest.mark.parametrize("tool_use_id", TRAVERSAL_IDS[:4])
def test_the_offloaded_content_page_reads_the_hostile_id_s_own_file(
    world: World, tool_use_id: str
) -> None:
    client = world.as_alice
    session_id = _session_with_tool_id(client, tool_use_id)
    client.call("POST", f"/api/sessions/{session_id}/offload", {"min_chars": 10})
    context = client.get(f"/api/sessions/{session_id}/context").json()
    reference = json.dumps(context["messages"])
    name = reference.split("[Content offloaded to: ./", 1)[1].split("]", 1)[0]
    browser = Client()
    browser.force_login(world.alice)

    response = browser.get(f"/sessions/{session_id}/offloaded/{name}")

    assert response.status_code == 200
    assert response.content.decode() == BIG_RESULT
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize(
    "name",
    [
        "../../../../secret.txt",
        "..%2F..%2F..%2F..%2Fsecret.txt",
        "%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt",
        "/etc/passwd",
        "....//....//secret.txt",
        "..\\..\\..\\..\\secret.txt",
    ],
)
def test_no_offloaded_content_read_escapes_the_session_folder(
    world: World, data_dir: Path, name: str
) -> None:
    secret = data_dir.parent / "secret.txt"
    secret.write_text("TOP SECRET")
    (data_dir / "blobs").mkdir(exist_ok=True)
    (data_dir / "blobs" / "secret.txt").write_text("TOP SECRET")
    browser = Client()
    browser.force_login(world.alice)

    response = browser.get(f"/sessions/{world.session.pk}/offloaded/{name}")

    assert response.status_code == 404
    assert b"TOP SECRET" not in response.content
    assert b"root:" not in response.content


@pytest.mark.parametrize("filename", TRAVERSAL_NAMES)
def test_an_uploaded_file_name_cannot_escape_the_data_dir(
    world: World, tmp_path: Path, data_dir: Path, outside: set[Path], filename: str
) -> None:
    line = {"type": "user", "message": {"role": "user", "content": "hello"}, "uuid": "u1"}
    upload = SimpleUploadedFile(filename, (json.dumps(line) + "\n").encode(), "text/plain")
    client = ApiClient(world.alice_key)

    response = client.post(
        "/api/sessions/import", {"file": upload, "format": "claude_code"}, format="multipart"
    )

    assert response.status_code == 201, response.content[:500]
    assert _outside(tmp_path, data_dir) == outside
    session = Session.objects.get(pk=response.json()["session_id"])
    stored = Path(session.raw_source.path).resolve()
    assert data_dir.resolve() in stored.parents, stored
    assert stored.read_bytes() == (json.dumps(line) + "\n").encode()


@pytest.mark.parametrize(
    "session_id",
    ["..", "..%2F..", "%2e%2e", "../../etc/passwd", "00000000-0000-0000-0000-000000000000/.."],
)
def test_hostile_session_ids_are_404_everywhere(world: World, session_id: str) -> None:
    client = world.as_alice
    for path in (
        f"/api/sessions/{session_id}",
        f"/api/sessions/{session_id}/context",
        f"/api/sessions/{session_id}/export",
    ):
        response = client.get(path)
        assert response.status_code == 404, (path, response.status_code)
    offload = client.call("POST", f"/api/sessions/{session_id}/offload", {})
    assert offload.status_code == 404


def test_offload_does_not_reveal_server_paths(world: World, data_dir: Path) -> None:
    session_id = _session_with_tool_id(world.as_alice, "toolu_plain")

    response = world.as_alice.call("POST", f"/api/sessions/{session_id}/offload", {"min_chars": 10})

    files = response.json()["files"]
    assert files
    for name in files:
        assert not name.startswith(("/", "http:", "https:")), name
        assert str(data_dir) not in name
