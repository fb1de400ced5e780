"""The service error tree: what a service refuses, and why, in one hierarchy.

Services (and selectors) raise these; the REST API (ctxweb/api.py) and the views
(sessions_app/views/failures.py) each map the tree once:

- `InvalidInput` (422): the caller's input is wrong; every problem names its field path;
- `NotFound` (404): a session, compaction, job or file that is not there (or not the
  caller's);
- `Conflict` (409): the session changed under the operation or another must go first;
- `Unavailable` (503 with Retry-After): the database, the storage or the summary model
  failed; trying again later may work.

An internal invariant broken inside a service is not a `ServiceError`: it propagates as
itself and is answered 500 (a bug), never 422. See docs/architecture.md ("Errors").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Conflict",
    "InvalidInput",
    "NotFound",
    "Problem",
    "ServiceError",
    "Unavailable",
    "VersionConflict",
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
