"""Reading an import's input: a path, bytes, text or a file object, as a seekable byte stream.

Line-based formats are read one line at a time (bounded memory) and some are read twice, so
a non-seekable stream is first copied to a temporary file.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ..unstorable import MAX_DEPTH, clean, clean_text, has_surrogate, too_deep
from .errors import TranscriptError

__all__ = ["Progress", "Source", "load_json", "open_source", "parse_json_line"]

#: A progress callback: (stage, done, total); for reading, bytes of the input.
Progress = Callable[[str, int, int], None]

_SPOOL_MEMORY = 8 * 1024 * 1024
_CHUNK = 1024 * 1024
_REPORT_EVERY = 4 * 1024 * 1024
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class Source:
    """A seekable binary input with its display name and, when it is a file, its path."""

    def __init__(self, file: IO[bytes], *, name: str, path: Path | None, owned: bool) -> None:
        self.file = file
        self.name = name
        self.path = path
        self._owned = owned
        self._start = file.tell()
        self.progress: Progress | None = None
        self._passes = 0

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rewind(self) -> None:
        """Go back to the start of the input."""
        self.file.seek(self._start)

    def head(self, size: int = 64 * 1024) -> bytes:
        """The first `size` bytes (the position is restored to the start)."""
        self.rewind()
        data = self.file.read(size)
        self.rewind()
        return data

    def read_all(self) -> bytes:
        """The whole input."""
        self.rewind()
        return self.file.read()

    def size(self) -> int | None:
        """The input's size in bytes, when it can be known without reading it."""
        try:
            current = self.file.tell()
            end = self.file.seek(0, os.SEEK_END)
            self.file.seek(current)
        except (OSError, ValueError):
            return None
        return end - self._start

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(1-based line number, line without its end-of-line) for every line, streamed.

        Reports progress (stage `pass N`, bytes read, size) every few megabytes when a
        `progress` callback is set.
        """
        self.rewind()
        self._passes += 1
        stage = f"pass {self._passes}"
        total = self.size() or 0 if self.progress else 0
        done = reported = 0
        for number, raw in enumerate(self.file, start=1):
            if self.progress is not None:
                done += len(raw)
                if done - reported >= _REPORT_EVERY:
                    self.progress(stage, done, total)
                    reported = done
            yield number, raw.rstrip(b"\r\n")
        if self.progress is not None:
            self.progress(stage, total or done, total or done)

    def close(self) -> None:
        """Close the file when this Source opened it."""
        if self._owned:
            self.file.close()


def open_source(source: Any, *, name: str = "") -> Source:
    """A Source for a path, bytes, str text or a (binary or text) file object."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            file: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by Source.close
        except OSError as exc:
            raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return Source(file, name=clean_text(name or path.name), path=path, owned=True)
    if isinstance(source, bytes | bytearray):
        return Source(io.BytesIO(bytes(source)), name=clean_text(name), path=None, owned=True)
    if not hasattr(source, "read"):
        raise TranscriptError(f"cannot import from a {type(source).__name__}")
    display = clean_text(name or Path(str(getattr(source, "name", "") or "")).name)
    if isinstance(source, io.TextIOBase):
        return _spooled(_encoded_chunks(source), display)
    if _seekable(source):
        return Source(source, name=display, path=None, owned=False)
    return _spooled(_chunks(source), display)


def _seekable(file: Any) -> bool:
    try:
        return bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def _chunks(file: Any) -> Iterator[bytes]:
    while chunk := file.read(_CHUNK):
        yield chunk if isinstance(chunk, bytes) else str(chunk).encode()


def _encoded_chunks(file: Any) -> Iterator[bytes]:
    while chunk := file.read(_CHUNK):
        yield chunk.encode()


def _spooled(chunks: Iterator[bytes], name: str) -> Source:
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY)  # noqa: SIM115
    for chunk in chunks:
        spool.write(chunk)
    spool.seek(0)
    return Source(spool, name=name, path=None, owned=True)


def parse_json_line(raw: bytes) -> tuple[Any, str]:
    """(value, "") for a JSON line, or (None, reason) when it cannot be read."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 at byte {exc.start}"
    try:
        return load_json(text), ""
    except ValueError as exc:
        kind = "truncated JSON" if "Unterminated" in str(exc) or "Expecting" in str(exc) else ""
        return None, f"{kind or 'invalid JSON'}: {exc}"


def load_json(text: str) -> Any:
    """`json.loads(text)` made storable: what no database can store is cleaned, not refused.

    Every JSON text an importer reads comes through here. A real transcript holding a NUL
    character (written `\\u0000`) loses it, a lone surrogate (`\\ud800`, an escape without
    its pair) becomes U+FFFD and `NaN`, `Infinity` or `1e400` become null
    (sessions_app/unstorable.py): refusing the whole transcript for them would lose the rest.
    Nesting deeper than MAX_DEPTH is a ValueError, like any unreadable JSON.
    """
    try:
        value = json.loads(text, parse_constant=lambda _name: None, parse_float=_finite)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    if too_deep(value):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    # Inside a JSON string a NUL can only be written as an escape; a surrogate mostly is.
    if "\\u0000" in text or _SURROGATE_ESCAPE.search(text) or has_surrogate(text):
        return clean(value)
    return value


def _finite(raw: str) -> float | None:
    number = float(raw)
    return number if math.isfinite(number) else None
