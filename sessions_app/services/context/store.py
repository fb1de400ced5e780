"""Assembled context responses kept as files, so a fresh process need not rebuild them.

Building a 1M-token context means reading about 5 MB of stored message contents, most of
the time of a cold `GET /context` on PostgreSQL. services/context/text.py writes each
response it builds here (one file per session and format, the newest state wins) and a
process without it in memory reads the file instead: a header line with the state it
describes, then the response bytes. The reader checks the header's stamp against the
database like any cached text, so a stale file is never served, only extended or rebuilt.

The folder is `context` in CTXWEB_DATA_DIR; several machines may share it or keep their
own. Nothing is stored when CTXWEB_CONTEXT_CACHE_BYTES is 0, nor a response larger than
it. Any error reading or writing is treated as a miss: the store is an accelerator, never
the source of truth.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings

__all__ = ["clear", "header", "load", "remove", "save", "store_dir"]

logger = logging.getLogger("sessions_app")


def store_dir() -> Path:
    """The folder of the stored responses: `context` in CTXWEB_DATA_DIR."""
    return Path(settings.DATA_DIR) / "context"


def _path(key: str, fmt: str) -> Path:
    return store_dir() / f"{key}.{fmt}.ctx"


def load(key: str, fmt: str) -> tuple[dict[str, Any], bytes] | None:
    """(header, response bytes) stored for session `key` in `fmt`, or None."""
    try:
        with _path(key, fmt).open("rb") as stored:
            header = json.loads(stored.readline())
            data = stored.read()
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or len(data) != header.get("size"):
        return None  # a partly written or foreign file
    return header, data


def header(key: str, fmt: str) -> dict[str, Any] | None:
    """The header stored for session `key` in `fmt` (the response not read), or None."""
    try:
        with _path(key, fmt).open("rb") as stored:
            found = json.loads(stored.readline())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def save(key: str, fmt: str, header: dict[str, Any], data: bytes) -> None:
    """Store `data` for session `key` in `fmt` under `header` (atomically replaced)."""
    folder = store_dir()
    name = ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=folder, prefix=".ctx-")
        with os.fdopen(handle, "wb") as out:
            out.write(json.dumps({**header, "size": len(data)}).encode() + b"\n")
            out.write(data)
        os.replace(name, _path(key, fmt))
    except OSError as error:  # a full or read-only disk only costs speed
        logger.warning("context store: cannot write %s: %s", key, error)
        if name:
            Path(name).unlink(missing_ok=True)


def remove(key: str) -> None:
    """Forget the stored responses of session `key`."""
    for fmt in ("anthropic", "openai", "responses"):
        _path(key, fmt).unlink(missing_ok=True)


def clear() -> None:
    """Forget every stored response."""
    shutil.rmtree(store_dir(), ignore_errors=True)
