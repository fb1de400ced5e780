"""The engine's named exceptions. Every error the engine raises derives from CompactionError."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ArchiveError",
    "BlobStoreError",
    "CompactionError",
    "InvalidFilesError",
    "InvalidMessagesError",
    "PolicyError",
    "Problem",
    "SummaryError",
    "UnknownEncodingError",
]


class CompactionError(Exception):
    """Base class of every error the compaction engine raises."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, located by a path such as `messages[3].content[1]`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InvalidMessagesError(CompactionError, ValueError):
    """The messages are not a valid Anthropic-style history; `problems` says what and where."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        shown = "; ".join(str(p) for p in self.problems[:10])
        more = f" (and {len(self.problems) - 10} more)" if len(self.problems) > 10 else ""
        super().__init__(f"invalid messages: {shown}{more}")


class InvalidFilesError(CompactionError, ValueError):
    """The files to fold are not paths with source text; `problems` says what and where."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("invalid files: " + "; ".join(str(p) for p in self.problems[:10]))


class PolicyError(CompactionError, ValueError):
    """A policy field has a value outside its allowed range, or a preset name is unknown."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class UnknownEncodingError(CompactionError, ValueError):
    """The tiktoken encoding name is not one the engine can load offline."""


class SummaryError(CompactionError):
    """A summarizer could not produce a usable summary; `reason` is a stable failure name.

    The reasons are the values of `compaction.results.FailureReason`. `retry_after` is the
    wait in seconds the server asked for (`Retry-After`, `retry-after-ms`), if any: the
    engine's retry loop waits that long instead of its own backoff, within its maximum wait.
    """

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        retryable: bool = True,
        retry_after: float | None = None,
    ) -> None:
        self.reason = reason
        self.detail = detail
        self.retryable = retryable
        self.retry_after = retry_after
        super().__init__(f"{reason}: {detail}" if detail else reason)


class BlobStoreError(CompactionError, OSError):
    """A blob store could not write or read a blob."""


class ArchiveError(BlobStoreError):
    """The archive of compacted originals could not be written."""
