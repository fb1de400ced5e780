"""Errors of the service layer (the engine's own errors live in compaction.errors)."""

from __future__ import annotations

__all__ = ["Conflict", "VersionConflict"]


class Conflict(Exception):
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
