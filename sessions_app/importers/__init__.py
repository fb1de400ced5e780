"""Importers: real agent transcripts as canonical ctxweb sessions. Pure Python, no Django.

`parse(path_or_file, format=None)` and `parse_text(text, format=None)` return an
`ImportedSession`; `sessions_app.services.importing` stores one. Formats (as `Session.SourceFormat`
names them): claude_code, codex, openai, anthropic, swe_agent, openhands.
"""

from .blocks import NO_RESULT_TEXT, NO_SUMMARY_TEXT
from .claude_code import find_subagent_files
from .detect import canonical_format, detect_document, detect_format
from .errors import TranscriptError, UnknownFormatError
from .parse import parse, parse_text
from .types import (
    FORMATS,
    ContextItem,
    ImportedCompaction,
    ImportedMessage,
    ImportedSession,
    SkippedLine,
)

__all__ = [
    "FORMATS",
    "NO_RESULT_TEXT",
    "NO_SUMMARY_TEXT",
    "ContextItem",
    "ImportedCompaction",
    "ImportedMessage",
    "ImportedSession",
    "SkippedLine",
    "TranscriptError",
    "UnknownFormatError",
    "canonical_format",
    "detect_document",
    "detect_format",
    "find_subagent_files",
    "parse",
    "parse_text",
]
