"""The engine's named exceptions. Every error the engine raises derives from CompactionError."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ArchiveError",
    "BlobStoreError",
    "CompactionError",
    "FailureCause",
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


#: The error type a FailureCause names when the engine's own SummaryError is all there is.
SUMMARY_ERROR: Final = "SummaryError"


@dataclass(frozen=True)
class FailureCause:
    """Why a run rolled back, as fields a caller reads instead of parsing a message.

    As httpx's `HTTPStatusError` carries its response: `reason` is the stable failure name
    (`api_error`, `refusal`, ...), `message` the human text (for an HTTP error answer the
    server's message, without the `HTTP 429: ` the error's text adds), `status` the HTTP
    status when the summary model answered with an error, `retry_after` the wait in seconds
    it asked for, `provider` the summarizer that failed (its `name`: `anthropic`,
    `openai`, ...), `error_type` the exception's type name (SUMMARY_ERROR for the engine's
    own; a summarizer's or a step's exception by its own name; None when nothing raised).
    """

    reason: str
    message: str = ""
    status: int | None = None
    retry_after: float | None = None
    provider: str | None = None
    error_type: str | None = None

    @classmethod
    def raised(cls, reason: str, error: BaseException) -> FailureCause:
        """The cause of a failure that is `error`, an exception some code raised: its type
        name and its text (the type name when it has none)."""
        name = type(error).__name__
        return cls(reason, str(error) or name, error_type=name)


class SummaryError(CompactionError):
    """A summarizer could not produce a usable summary; `reason` is a stable failure name.

    The reasons are the values of `compaction.results.FailureReason`. `retry_after` is the
    wait in seconds the server asked for (`Retry-After`, `retry-after-ms`), if any: the
    engine's retry loop waits that long instead of its own backoff, within its maximum wait.
    `status` is the HTTP status of an error answer: the text then reads
    `HTTP {status}: {detail}`. `provider` names the summarizer; `error_type` the exception a
    summarizer raised, when this error stands for one. `cause` is all of it as one value.
    """

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        retryable: bool = True,
        retry_after: float | None = None,
        status: int | None = None,
        provider: str | None = None,
        error_type: str = SUMMARY_ERROR,
    ) -> None:
        self.reason = reason
        self.message = detail
        self.detail = f"HTTP {status}: {detail}" if status is not None else detail
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.provider = provider
        self.error_type = error_type
        super().__init__(f"{reason}: {self.detail}" if self.detail else reason)

    @classmethod
    def raised(cls, reason: str, error: BaseException) -> SummaryError:
        """The SummaryError standing for `error`, which a summarizer raised: its text is
        the exception's repr, its cause names the exception (`FailureCause.raised`)."""
        cause = FailureCause.raised(reason, error)
        made = cls(reason, repr(error), error_type=cause.error_type or SUMMARY_ERROR)
        made.message = cause.message
        return made

    @property
    def cause(self) -> FailureCause:
        """The fields of this error as one frozen value."""
        return FailureCause(
            self.reason,
            self.message,
            status=self.status,
            retry_after=self.retry_after,
            provider=self.provider,
            error_type=self.error_type,
        )


class BlobStoreError(CompactionError, OSError):
    """A blob store could not write or read a blob."""


class ArchiveError(BlobStoreError):
    """The archive of compacted originals could not be written."""
