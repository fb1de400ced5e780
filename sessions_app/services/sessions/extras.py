"""The extra message keys the app reads: `created_at`/`timestamp` and `usage`.

The engine passes extra keys through untouched (docs/behaviour.md#messages), but the app reads these
two, so they are checked with the messages, before anything is written (a bad `usage` used to fail
after the append had been stored, and a retrying client duplicated it):

- `created_at` (or `timestamp`): an ISO 8601 date-time (or date) string, or seconds since
  the Unix epoch, within the years 1..9999 once in UTC; null means "now".
- `usage`: an object; its token counts (`input_tokens`, `output_tokens`,
  `cache_creation_input_tokens`, `cache_read_input_tokens`, `prompt_tokens`,
  `completion_tokens`, `total_tokens`) integers with 0 <= n < 2**63, or null. Other keys of
  it are kept as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import Any, Final

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from compaction import Problem

__all__ = ["TIME_KEYS", "USAGE_COUNTS", "extra_problems", "message_time"]

TIME_KEYS: Final = ("created_at", "timestamp")
USAGE_COUNTS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
)
_MAX_COUNT: Final = 2**63
#: 9999-12-31T23:59:59Z: the last second a datetime (and the databases) can hold.
_MAX_EPOCH: Final = 253_402_300_799
_TIME_MESSAGE: Final = (
    "must be an ISO 8601 date-time (e.g. 2025-01-31T12:00:00Z) or seconds since the Unix "
    "epoch, within the years 1 to 9999"
)


def extra_problems(messages: Sequence[Any], start: int = 0) -> list[Problem]:
    """Problems of the time and usage keys of `messages`, numbered from `start`."""
    return [
        problem
        for index, message in enumerate(messages, start=start)
        if isinstance(message, Mapping)
        for problem in _message_problems(message, f"messages[{index}]")
    ]


def message_time(extra: Mapping[str, Any], default: datetime) -> datetime:
    """The time a (checked) message gives in `created_at` or `timestamp`, else `default`."""
    for key in TIME_KEYS:
        value = extra.get(key)
        if value is not None:
            return _parse_time(value) or default
    return default


def _message_problems(message: Mapping[str, Any], path: str) -> Iterator[Problem]:
    for key in TIME_KEYS:
        value = message.get(key)
        if value is not None and _parse_time(value) is None:
            yield Problem(f"{path}.{key}", _TIME_MESSAGE)
    if "usage" not in message or message["usage"] is None:
        return
    usage = message["usage"]
    if not isinstance(usage, Mapping):
        yield Problem(f"{path}.usage", "must be an object of token counts")
        return
    for key in USAGE_COUNTS:
        count = usage.get(key)
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int):
            yield Problem(f"{path}.usage.{key}", "must be an integer")
        elif not 0 <= count < _MAX_COUNT:
            yield Problem(f"{path}.usage.{key}", "must be between 0 and 2**63 - 1")


def _parse_time(value: Any) -> datetime | None:
    """`value` as an aware datetime in UTC, or None when it is not a usable time."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        # Compared before any float conversion: 10**400 is an int no float can hold.
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return datetime.fromtimestamp(value, tz=UTC) if 0 <= value <= _MAX_EPOCH else None
    if not isinstance(value, str):
        return None
    try:
        parsed = parse_datetime(value)
        if parsed is None:
            day = parse_date(value)
            parsed = datetime.combine(day, time.min) if isinstance(day, date) else None
    except ValueError:  # well-formed but impossible: month 13, year 0
        return None
    if parsed is None:
        return None
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-10:00 is in the year 10000 in UTC
        return None
