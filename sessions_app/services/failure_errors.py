"""The underlying error of a failed compaction, as recorded in `Compaction.details["error"]`.

A failed attempt keeps what a person needs to understand it: the failure `reason` (a
stable name such as `api_error`), the exception `type`, its `message`, the HTTP `status`
when the summary model answered with an error, and the server's `retry_after` and the
number of summary `attempts` when known. The engine reports a summary failure as a
rollback event whose detail is the SummaryError's detail (`HTTP 429: ...` for an HTTP
error answer, `RuntimeError('...')` for a summarizer that raised); a failure at commit
passes the exception itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["failure_error", "with_failure_error"]

#: `HTTP 429: rate limited` (compaction/summarizers/sdk.py status_error).
_HTTP: Final = re.compile(r"\bHTTP (?P<status>[1-5]\d\d)\b:?\s*(?P<message>.*)", re.DOTALL)
#: `RuntimeError('boom')`: the repr of an exception a summarizer raised.
_REPR: Final = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*)\((?P<q>['\"]?)(?P<message>.*)(?P=q)\)$", re.DOTALL
)
#: The type named when the engine's SummaryError is all that is known.
SUMMARY_ERROR: Final = "SummaryError"
#: Longest message kept (an error answer can quote a whole request).
MAX_MESSAGE: Final = 2000


def failure_error(
    reason: str, details: Mapping[str, Any], error: BaseException | None = None
) -> dict[str, Any]:
    """The error record of a failed attempt: type, message, status, reason (and retries).

    `details` is the Compaction's details (its engine `events`); `error` the exception
    of a failure at commit, if any.
    """
    events = details.get("events")
    events = events if isinstance(events, Sequence) else []
    record: dict[str, Any] = {"type": None, "message": reason, "status": None, "reason": reason}
    if error is not None:
        record["type"] = type(error).__name__
        record["message"] = str(error) or type(error).__name__
    else:
        _from_detail(record, _rollback_detail(events))
    retries = [e for e in events if isinstance(e, Mapping) and e.get("phase") == "summary_retry"]
    if retries:
        record["attempts"] = len(retries) + 1
        waits = [_retry_after(e) for e in retries]
        known = [w for w in waits if w is not None]
        if known:
            record["retry_after"] = known[-1]
    record["message"] = str(record["message"])[:MAX_MESSAGE]
    return record


def with_failure_error(
    details: Mapping[str, Any], reason: str, error: BaseException | None = None
) -> dict[str, Any]:
    """`details` with its `error` record (failure_error)."""
    return {**details, "error": failure_error(reason, details, error)}


def _from_detail(record: dict[str, Any], detail: str) -> None:
    """Fill type, message and status from a rollback event's detail text."""
    if not detail:
        return
    record["type"] = SUMMARY_ERROR
    record["message"] = detail
    raised = _REPR.match(detail.strip())
    if raised is not None:
        record["type"] = raised["type"].rsplit(".", 1)[-1]
        record["message"] = raised["message"] or raised["type"]
    http = _HTTP.search(str(record["message"]))
    if http is not None:
        record["status"] = int(http["status"])
        record["message"] = http["message"].strip() or str(record["message"])


def _rollback_detail(events: Sequence[Any]) -> str:
    """The detail text of the last rollback event ('' when there is none)."""
    for event in reversed(events):
        if isinstance(event, Mapping) and event.get("phase") == "rollback":
            detail = event.get("detail")
            if isinstance(detail, Mapping):
                text = detail.get("detail") or detail.get("error") or ""
                return str(text)
    return ""


def _retry_after(event: Mapping[str, Any]) -> float | None:
    detail = event.get("detail")
    if isinstance(detail, Mapping) and isinstance(detail.get("retry_after"), int | float):
        return float(detail["retry_after"])
    return None
