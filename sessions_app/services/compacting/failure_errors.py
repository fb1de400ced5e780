"""The underlying error of a failed compaction, as recorded in `Compaction.details["error"]`.

A failed attempt keeps what a person needs to understand it: the failure `reason` (a
stable name such as `api_error`), the exception `type`, its `message`, the HTTP `status`
when the summary model answered with an error, and the server's `retry_after` and the
number of summary `attempts` when known. They are read from fields, never parsed from a
message: the engine's failure is a `compaction.FailureCause` (`CompactResult.failure`:
status, retry_after, provider, error type); a failure at commit passes the exception
itself; the retries are the engine's `summary_retry` events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from compaction import FailureCause

__all__ = ["failure_error", "with_failure_error"]

#: The type named when the engine's failure names no exception of its own.
SUMMARY_ERROR: Final = "SummaryError"
#: Longest message kept (an error answer can quote a whole request).
MAX_MESSAGE: Final = 2000


def failure_error(
    reason: str,
    details: Mapping[str, Any],
    error: BaseException | None = None,
    *,
    cause: FailureCause | None = None,
) -> dict[str, Any]:
    """The error record of a failed attempt: type, message, status, reason (and retries).

    `details` is the Compaction's details (its engine `events`); `error` the exception
    of a failure at commit, if any; `cause` the engine's failure (`CompactResult.failure`).
    """
    record: dict[str, Any] = {"type": None, "message": reason, "status": None, "reason": reason}
    if error is not None:
        record["type"] = type(error).__name__
        record["message"] = str(error) or type(error).__name__
    elif cause is not None and cause.message:
        record["type"] = cause.error_type or SUMMARY_ERROR
        record["message"] = cause.message
        record["status"] = cause.status
    events = details.get("events")
    retries = [
        e
        for e in (events if isinstance(events, Sequence) else [])
        if isinstance(e, Mapping) and e.get("phase") == "summary_retry"
    ]
    if retries:
        record["attempts"] = len(retries) + 1
        waits = [_retry_after(e) for e in retries]
        known = [w for w in waits if w is not None]
        if known:
            record["retry_after"] = known[-1]
    record["message"] = str(record["message"])[:MAX_MESSAGE]
    return record


def with_failure_error(
    details: Mapping[str, Any],
    reason: str,
    error: BaseException | None = None,
    *,
    cause: FailureCause | None = None,
) -> dict[str, Any]:
    """`details` with its `error` record (failure_error)."""
    return {**details, "error": failure_error(reason, details, error, cause=cause)}


def _retry_after(event: Mapping[str, Any]) -> float | None:
    detail = event.get("detail")
    if isinstance(detail, Mapping) and isinstance(detail.get("retry_after"), int | float):
        return float(detail["retry_after"])
    return None
