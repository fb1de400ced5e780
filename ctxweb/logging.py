"""A log formatter that appends a record's structured fields as key=value pairs."""

from __future__ import annotations

import json
import logging

_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """`time level logger message key=value ...`, with the extra fields a record carries."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS}
        if not extras:
            return line
        fields = " ".join(
            f"{key}={json.dumps(value, default=str)}" for key, value in extras.items()
        )
        return f"{line} {fields}"
