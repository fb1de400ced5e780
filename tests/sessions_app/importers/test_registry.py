"""One registry of import formats (issue 24 item 4): everything that lists or reads formats asks it.

A format registered here, in the test, with no other edit, is detected, parsed, offered by the
upload form, imported by the upload page and by the API; the built-in formats are today's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile
from django.test import Client
from django.test.client import MULTIPART_CONTENT
from django.urls import reverse
from django.utils.datastructures import MultiValueDict

from sessions_app.importers import (
    ImportedMessage,
    ImportedSession,
    ImportFormat,
    canonical_format,
    detect_format,
    format_names,
    import_formats,
    parse_text,
    register,
    unregister,
)
from sessions_app.importers.builder import SessionBuilder
from sessions_app.importers.source import Source, parse_json_line
from sessions_app.models import Session
from sessions_app.views.upload import ImportForm, format_choices

#: The formats, their labels and spellings as they were listed by hand before the registry.
BUILT_IN = ("claude_code", "codex", "openai", "anthropic", "swe_agent", "openhands")
MODEL_CHOICES = [
    ("api", "API"),
    ("claude_code", "Claude Code"),
    ("codex", "Codex CLI"),
    ("openai", "OpenAI chat"),
    ("anthropic", "Anthropic messages"),
    ("swe_agent", "SWE-agent"),
    ("openhands", "OpenHands"),
]
UPLOAD_CHOICES = [
    ("", "Detect automatically"),
    ("claude_code", "Claude Code JSONL"),
    ("codex", "Codex CLI rollout"),
    ("openai", "OpenAI chat messages"),
    ("anthropic", "Anthropic messages"),
    ("swe_agent", "SWE-agent trajectory"),
    ("openhands", "OpenHands events"),
]
ALIASES = {
    "claude-code": "claude_code",
    "claude": "claude_code",
    "codex_cli": "codex",
    "openai_chat": "openai",
    "chat": "openai",
    "anthropic_json": "anthropic",
    "swe-agent": "swe_agent",
    "traj": "swe_agent",
}

TALLY = "\n".join(
    json.dumps({"tally": role, "text": text})
    for role, text in [("user", "count the sheep"), ("assistant", "There are 3.")]
)


def _is_tally_line(value: Mapping[str, Any]) -> bool:
    return "tally" in value


def _read_tally(source: Source, *, subagents: bool) -> ImportedSession:
    builder = SessionBuilder("tally", source_name=source.name)
    for _number, raw in source.lines():
        value, _problem = parse_json_line(raw)
        if isinstance(value, dict):
            builder.add(ImportedMessage(message={"role": value["tally"], "content": value["text"]}))
    return builder.finish()


@pytest.fixture
def tally() -> Iterator[ImportFormat]:
    """A tiny JSON-lines format registered for one test, as an outside module would."""
    fmt = register(
        ImportFormat(
            name="tally",
            label="Tally",
            file_label="Tally lines",
            aliases=("tally-lines",),
            detect=_is_tally_line,
            read_lines=_read_tally,
        )
    )
    yield fmt
    unregister("tally")


def test_the_built_in_formats_are_the_ones_listed_before() -> None:
    assert format_names() == BUILT_IN
    field = Session._meta.get_field("source_format")
    assert list(field.choices or []) == MODEL_CHOICES
    assert format_choices() == UPLOAD_CHOICES
    for alias, name in ALIASES.items():
        assert canonical_format(alias) == name
    assert all(canonical_format(name) == name for name in BUILT_IN)


def test_a_format_is_registered_once() -> None:
    with pytest.raises(ValueError, match="already registered: claude"):
        register(
            ImportFormat(
                name="other",
                label="Other",
                file_label="Other",
                aliases=("claude",),
                detect=_is_tally_line,
                read_lines=_read_tally,
            )
        )
    assert "other" not in format_names()
    with pytest.raises(ValueError, match="exactly one"):
        ImportFormat(name="x", label="X", file_label="X", detect=_is_tally_line)


def test_a_registered_format_is_detected_and_parsed(tally: ImportFormat) -> None:
    assert import_formats()[-1] is tally
    assert canonical_format("Tally-Lines") == "tally"
    assert detect_format(TALLY) == "tally"
    for format in (None, "tally"):
        imported = parse_text(TALLY, format)
        assert imported.source_format == "tally"
        assert [m.message["content"] for m in imported.messages] == [
            "count the sheep",
            "There are 3.",
        ]


def test_the_upload_form_offers_a_registered_format(tally: ImportFormat) -> None:
    assert ("tally", "Tally lines") in format_choices()
    files: MultiValueDict[str, UploadedFile[Any]] = MultiValueDict(
        {"file": [SimpleUploadedFile("farm.log", TALLY.encode())]}
    )
    form = ImportForm({"format": "tally"}, files)
    assert form.is_valid(), form.errors


@pytest.mark.django_db
def test_the_page_and_the_api_import_a_registered_format(
    tally: ImportFormat, user: Any, api_client: Any
) -> None:
    client = Client()
    client.force_login(user)
    page = client.post(reverse("ui:import"), {"file": _file(TALLY, "farm.log"), "format": "tally"})
    assert page.status_code == 302
    assert Session.objects.get(owner=user, source_format="tally").message_count == 2
    answer = api_client.post(
        "/api/sessions/import",
        {"file": _file(TALLY, "barn.log"), "format": "tally"},
        content_type=MULTIPART_CONTENT,
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["source_format"] == "tally"
    detected = api_client.post("/api/sessions/import", {"content": TALLY + "\n"})
    assert detected.status_code in (200, 201), detected.content
    assert detected.json()["source_format"] == "tally"


def _file(text: str, name: str) -> io.BytesIO:
    upload = io.BytesIO(text.encode())
    upload.name = name
    return upload


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ('[{"role": "user", "content": [{"type": "tool_use", "id": "a', "anthropic"),
        ('{"messages": [{"role": "assistant", "tool_calls": [{"id": "a', "openai"),
        ('[{"source": "user", "action": "message", "role": "user", "args": {"x', "openhands"),
        ('{"history": [{"role": "tool", "content": "x"}], "info": {"a', "swe_agent"),
    ],
)
def test_a_cut_document_is_guessed_in_the_old_order(head: str, expected: str) -> None:
    """The formats' head scores keep the order the single guesser had (strong clues first)."""
    assert detect_format(head) == expected
