"""`/api/sessions/import` and `/api/sessions/{id}/export`: transcripts in and out.

Import takes an uploaded file (multipart, field `file`, optional fields `format` and
`title`) or JSON `{"content": ..., "format"?: ..., "title"?: ...}` where `content` is the
transcript's text (or, for JSON formats, the document itself). The format is detected from
the content unless given. Export gives the runtime context or the full history as an
Anthropic request, an OpenAI chat request or a Markdown transcript.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from ninja import Query, Router, Schema

from sessions_app.services.errors import InvalidInput
from sessions_app.services.importing import import_file
from sessions_app.services.sessions.exporting import export_session

from ..importers import format_names
from ..nul import NUL, NUL_MESSAGE
from .body import parse_json_body
from .common import errors, owned_session, user_of
from .schemas import SessionOut
from .serializers import session_dict

__all__ = ["router"]

router = Router(tags=["import and export"])

_IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "format": {"type": "string", "enum": list(format_names())},
                        "title": {"type": "string", "maxLength": 300},
                    },
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["content"],
                    "properties": {
                        "content": {
                            "description": "the transcript: its text, or a JSON document",
                            "anyOf": [
                                {"type": "string", "minLength": 1},
                                {"type": "object"},
                                {"type": "array"},
                            ],
                        },
                        "format": {"type": "string", "enum": list(format_names())},
                        "title": {"type": "string", "maxLength": 300},
                    },
                }
            },
        },
    }
}


class SkippedOut(Schema):
    line: int
    reason: str


class ImportOut(Schema):
    session: SessionOut
    session_id: str
    session_ids: list[str]
    source_name: str
    source_format: str
    counts: dict[str, int]
    skipped: list[SkippedOut]
    skipped_count: int
    kept_raw: int
    created: bool
    new_messages: int


class ExportQuery(Schema):
    format: Literal["anthropic", "openai", "responses", "markdown"] = "anthropic"
    what: Literal["context", "history"] = "context"


@router.post(
    "/import",
    response={201: ImportOut, **errors(400, 403, 413, 422)},
    openapi_extra=_IMPORT_BODY,
    summary="Import a transcript",
)
def import_transcript(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    """Store a Claude Code, Codex, OpenAI, Anthropic, SWE-agent or OpenHands transcript.

    Corrupt lines are skipped and listed (`skipped`, with line numbers); bookkeeping lines
    are kept in the archived raw source (`kept_raw`). Subagent transcripts inside the file
    become sessions linked to this one (`session_ids`). A transcript imported before (same
    format and source session id) updates its session (`created: false`, `new_messages`)
    instead of making a duplicate.
    """
    try:
        source, name, fields, where = _import_input(request)
        chosen = _format(fields.get("format"))
        title = _title(fields.get("title"))
        report = import_file(
            user_of(request), source, format=chosen, title=title, name=name, field=where
        )
    except _Unprocessable as problem:
        return 422, {"detail": [{"path": problem.path, "message": problem.message}]}
    except InvalidInput as error:
        return 422, {"detail": [{"path": p.path, "message": p.message} for p in error.problems]}
    return 201, {"session": session_dict(report.session), **report.as_dict()}


@router.get(
    "/{session_id}/export",
    response={200: None, **errors(422)},
    openapi_extra={
        "responses": {
            200: {
                "description": "the export, as a file",
                "content": {
                    "application/json": {"schema": {"type": "object"}},
                    "text/markdown": {"schema": {"type": "string"}},
                },
            }
        }
    },
    summary="Export a session",
)
def export(request: HttpRequest, session_id: str, query: Query[ExportQuery]) -> HttpResponse:
    """The runtime context (`what=context`) or full history as anthropic, openai or markdown."""
    session = owned_session(request, session_id)
    result = export_session(session, query.format, query.what)
    response = HttpResponse(result.body, content_type=result.media_type)
    filename = f"session-{session.pk}-{query.what}.{query.format}.{result.extension}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _format(value: Any) -> str | None:
    if value is None or value == "":
        return None
    names = format_names()
    if value not in names:
        raise _Unprocessable("format", f"unknown format {value!r}; known: {', '.join(names)}")
    return str(value)


def _title(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 300:
        raise _Unprocessable("title", "must be a string of at most 300 characters")
    if NUL in value:
        raise _Unprocessable("title", NUL_MESSAGE)
    return value


def _import_input(request: HttpRequest) -> tuple[Any, str, dict[str, Any], str]:
    """(source, display name, other fields, field to blame) from a multipart or JSON body."""
    if request.content_type == "multipart/form-data":
        try:
            upload = request.FILES.get("file")
        except MultiPartParserError as error:
            # A malformed body, or a part whose headers pass Django's 1 KB: in practice
            # a file name of a thousand characters or so.
            raise _Unprocessable(
                "file",
                f"the upload cannot be read: {error} (a file name of about 1,000 bytes or "
                "more is one cause)",
            ) from None
        if upload is None:
            raise _Unprocessable("file", "upload the transcript in the `file` field")
        return upload, upload.name or "upload", dict(request.POST.items()), "file"
    # Parsed like every other body: 400 when not JSON, 422 naming a value no database can
    # store. (Escapes inside the transcript text itself are the importers' to clean.)
    body = parse_json_body(request.body or b"null")
    if not isinstance(body, dict) or "content" not in body:
        raise _Unprocessable("content", "give the transcript in `content` (or upload a file)")
    content = body["content"]
    if isinstance(content, dict | list):
        content = json.dumps(content, ensure_ascii=False)
    if not isinstance(content, str) or not content.strip():
        raise _Unprocessable("content", "must be the transcript's text or a JSON document")
    return content.encode("utf-8"), "upload", body, "content"


class _Unprocessable(Exception):
    """Input that cannot be imported: a 422 naming the failing field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
