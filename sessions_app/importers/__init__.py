"""Importers: real agent transcripts as canonical ctxweb sessions. Pure Python, no Django.

`parse(path_or_file, format=None)` and `parse_text(text, format=None)` return an
`ImportedSession`; `sessions_app.services.importing` stores one. The formats are those of the
registry (`registry.py`; `format_names()`): the built-in ones (claude_code, codex, openai,
anthropic, swe_agent, openhands, registered by `builtin.py`) and any a caller registers.
"""

from . import builtin as builtin  # registers the built-in formats before anything reads them
from .blocks import NO_RESULT_TEXT, NO_SUMMARY_TEXT
from .claude_code import find_subagent_files
from .detect import canonical_format, detect_document, detect_format
from .errors import TranscriptError, UnknownFormatError
from .parse import parse, parse_text
from .registry import ImportFormat, format_names, get_format, import_formats, register, unregister
from .types import (
    ContextItem,
    ImportedCompaction,
    ImportedMessage,
    ImportedSession,
    SkippedLine,
)

__all__ = [
    "NO_RESULT_TEXT",
    "NO_SUMMARY_TEXT",
    "ContextItem",
    "ImportFormat",
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
    "format_names",
    "get_format",
    "import_formats",
    "parse",
    "parse_text",
    "register",
    "unregister",
]
