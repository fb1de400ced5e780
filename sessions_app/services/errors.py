"""The service error tree: what a service refuses, and why, in one hierarchy.

Services (and selectors) raise these; the REST API (ctxweb/api.py) and the views
(sessions_app/views/failures.py) each map the tree once:

- `InvalidInput` (422): the caller's input is wrong; every problem names its field path;
- `NotFound` (404): a session, compaction, job or file that is not there (or not the
  caller's);
- `Conflict` (409): the session changed under the operation or another must go first;
- `Unavailable` (503 with Retry-After): the database, the storage or the summary model
  failed; trying again later may work.

An internal invariant broken inside a service is not a `ServiceError`: it raises
`InvariantError` (a RuntimeError), answered 500 (a bug), never 422. The engine's own errors
(`compaction.CompactionError`) are translated at the service boundary by `engine_error`. See
docs/architecture.md ("Errors").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from compaction import (
    BlobStoreError,
    CompactionError,
    InvalidFilesError,
    InvalidMessagesError,
    PolicyError,
    SummaryError,
)

__all__ = [
    "Conflict",
    "InvalidInput",
    "InvariantError",
    "NotFound",
    "Problem",
    "ServiceError",
    "Unavailable",
    "VersionConflict",
    "engine_error",
]


class ServiceError(Exception):
    """Base of every error a service raises on purpose."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: the field's path (`messages[3].content`) and why."""

    path: str
    message: str


class InvalidInput(ServiceError, ValueError):
    """The input cannot be used; `problems` names each offending field (422)."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        if not self.problems:
            raise TypeError("InvalidInput needs at least one problem")
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in self.problems))

    @classmethod
    def field(cls, path: str, message: str) -> InvalidInput:
        """The error for one field."""
        return cls([Problem(path, message)])

    @property
    def first(self) -> Problem:
        """The first problem (forms show it on its field)."""
        return self.problems[0]


class NotFound(ServiceError, LookupError):
    """What the caller asked for does not exist or is not theirs (404)."""

    def __init__(self, message: str = "not found") -> None:
        super().__init__(message)


class Conflict(ServiceError):
    """The session changed under an operation, or the operation must wait for another (409)."""

    def __init__(self, message: str, *, blocking: int | None = None) -> None:
        self.blocking = blocking
        super().__init__(message)


class VersionConflict(Conflict):
    """`expected_version` did not match the session's current version."""

    def __init__(self, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"session is at version {actual}, not the expected {expected}")


class Unavailable(ServiceError):
    """A dependency (database, storage, summary model) failed; try again later (503)."""

    def __init__(self, message: str, *, retry_after: int = 5) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class InvariantError(RuntimeError):
    """An internal invariant was broken (a bug): never a ServiceError, answered 500."""


def engine_error(error: CompactionError) -> ServiceError:
    """The service error standing for an engine error, raised `from` it by the services.

    Invalid messages or files keep their problems' paths; a PolicyError names its field;
    a summary model or storage failure is Unavailable (503, the model's own Retry-After
    when it gave one). Any other engine error is about the input as a whole (`body`).
    """
    if isinstance(error, InvalidMessagesError | InvalidFilesError):
        return InvalidInput(Problem(p.path, p.message) for p in error.problems)
    if isinstance(error, PolicyError):
        return InvalidInput.field(error.field, str(error).split(": ", 1)[-1])
    if isinstance(error, SummaryError):
        wait = math.ceil(error.retry_after) if error.retry_after else 5
        return Unavailable(f"summary model unavailable: {error}", retry_after=max(1, wait))
    if isinstance(error, BlobStoreError):
        return Unavailable(f"storage unavailable: {error.strerror or error}")
    return InvalidInput.field("body", str(error))
