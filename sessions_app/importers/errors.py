"""Errors raised by the importers (a whole input that cannot be read; bad lines are skipped)."""

from __future__ import annotations

__all__ = ["TranscriptError", "UnknownFormatError"]


class TranscriptError(ValueError):
    """The input cannot be imported at all (not JSON, wrong shape, unreadable file)."""


class UnknownFormatError(TranscriptError):
    """The format was not given and could not be recognised from the content, or is unknown."""
