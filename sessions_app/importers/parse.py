"""The importers' entry points: `parse` (a path or a file) and `parse_text` (a string)."""

from __future__ import annotations

import os
from typing import IO, Any

from ..unstorable import clean_text
from .detect import detect_document, detect_format
from .errors import TranscriptError, UnknownFormatError
from .registry import ImportFormat, format_names, get_format
from .source import Progress, Source, load_json, open_source
from .types import ImportedSession

__all__ = ["parse", "parse_source", "parse_text"]


def parse(
    source: str | os.PathLike[str] | IO[bytes] | IO[str] | bytes,
    format: str | None = None,
    *,
    name: str = "",
    subagents: bool = True,
    progress: Progress | None = None,
) -> ImportedSession:
    """Import one transcript: a path, bytes or a file object; the format is detected if not given.

    JSON-lines formats (Claude Code, Codex) are streamed line by line; JSON documents are
    read whole. A Claude Code file given by path also brings its subagent transcripts when
    `subagents` is true. `progress(stage, done, total)` is told how reading goes. Raises
    TranscriptError (UnknownFormatError) when nothing can be read.
    """
    with open_source(source, name=name) as opened:
        opened.progress = progress
        return parse_source(opened, format, subagents=subagents)


def parse_text(text: str, format: str | None = None, *, name: str = "") -> ImportedSession:
    """Import a transcript given as a string (lone surrogates in it become U+FFFD)."""
    return parse(clean_text(text).encode("utf-8"), format, name=name)


def parse_source(
    source: Source, format: str | None = None, *, subagents: bool = True
) -> ImportedSession:
    """Import from an opened Source (left open: the caller may archive its bytes)."""
    chosen = _chosen_format(format)
    if chosen is None:
        guess = get_format(detect_format(source.head()) or "")
        chosen = guess if guess is not None and guess.is_lines else None  # documents: loaded
    if chosen is not None and chosen.read_lines is not None:
        return chosen.read_lines(source, subagents=subagents)
    document = _load_document(source)
    if chosen is None:
        chosen = get_format(detect_document(document) or "")
    if chosen is None or chosen.read_document is None:
        raise UnknownFormatError(
            f"could not recognise the format of {source.name or 'the input'}; "
            f"give one of: {', '.join(format_names())}"
        )
    return chosen.read_document(document, source.name)


def _chosen_format(format: str | None) -> ImportFormat | None:
    if format is None or format == "" or format == "auto":
        return None
    chosen = get_format(format)
    if chosen is None:
        raise UnknownFormatError(f"unknown format {format!r}; known: {', '.join(format_names())}")
    return chosen


def _load_document(source: Source) -> Any:
    data = source.read_all()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            f"{source.name or 'input'}: not valid UTF-8 (byte {exc.start})"
        ) from exc
    try:
        return load_json(text)
    except ValueError as exc:
        raise TranscriptError(f"{source.name or 'input'}: not valid JSON: {exc}") from exc
