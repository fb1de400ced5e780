"""Upload errors are said once and plainly; a binary file is refused as one, whatever the
format chosen (issue 29 item 2)."""

from __future__ import annotations

import html
import zlib
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sessions_app.models import Session
from sessions_app.services.importing.binary import binary_kind

SAMPLES = Path(__file__).parents[2] / "fixtures" / "samples"

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def png() -> bytes:
    """A real (1x1) PNG: signature, IHDR, IDAT, IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 6, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff" * 200)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def notice(client: Client, name: str, data: bytes, fmt: str = "") -> str:
    upload = SimpleUploadedFile(name, data)
    response = client.post(reverse("ui:import"), {"file": upload, "format": fmt}, follow=True)
    page = html.unescape(response.content.decode())
    start = page.index("Could not import")
    return page[start : page.index("<", start)]


@pytest.mark.parametrize("fmt", ["", "claude_code", "openai"])
def test_a_picture_is_refused_as_a_picture(logged_in: Client, user: Any, fmt: str) -> None:
    said = notice(logged_in, "screenshot.png", png(), fmt)
    assert said.startswith("Could not import screenshot.png: this is a PNG image, not a transcript")
    assert "skipped" not in said
    assert not Session.objects.filter(owner=user).exists()


def test_the_file_name_is_said_once(logged_in: Client) -> None:
    said = notice(logged_in, "bad.jsonl", b"\xff\xfe\xfa" * 40)
    assert said.count("bad.jsonl") == 1, said
    assert "binary" in said


def test_a_transcript_with_one_broken_line_still_imports(logged_in: Client, user: Any) -> None:
    lines = (SAMPLES / "cclog_dag_compact_after_rewind.synthetic.jsonl").read_bytes().split(b"\n")
    lines.insert(3, b"\xff\xfe broken line")
    upload = SimpleUploadedFile("session.jsonl", b"\n".join(lines))
    response = logged_in.post(reverse("ui:import"), {"file": upload}, follow=True)
    assert response.status_code == 200
    assert Session.objects.filter(owner=user).count() == 1
    assert "lines skipped" in response.content.decode()


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"%PDF-1.7\n", "a PDF document"),
        (b"PK\x03\x04rest", "a ZIP archive (or a document stored as one)"),
        (b"\x1f\x8b\x08\x00", "a gzip-compressed file"),
        (b'{"a": 1}\x00', "a binary file"),
        ('{"text": "caf\u00e9 \u2014 ok"}\n'.encode(), None),
        ('{"text": "cut in a character \u00e9'.encode()[:-1], None),
        (b"", None),
    ],
)
def test_binary_kind(head: bytes, kind: str | None) -> None:
    assert binary_kind(head) == kind
