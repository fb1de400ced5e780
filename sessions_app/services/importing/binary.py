"""Telling a binary file from a transcript before any format reads it (issue 29 item 2).

Every transcript ctxweb imports is UTF-8 text (JSON or JSON lines). A picture or an archive
given by mistake, read as lines of a forced format, turned into "216 lines skipped"; read by
detection, into "not valid UTF-8 (byte 0)". `binary_kind` looks at the first bytes once: a
known file signature, a NUL byte (JSON escapes it, so a text transcript has none) or mostly
undecodable bytes is a binary file, said so in one plain sentence.
"""

from __future__ import annotations

from typing import Final

__all__ = ["HEAD_BYTES", "binary_kind", "binary_problem"]

#: How much of the file is looked at.
HEAD_BYTES: Final = 8192
#: Above this share of undecodable bytes in the head, the file is not text.
_UNDECODABLE_SHARE: Final = 0.1
#: (signature, what the file is): the usual things picked by mistake in a file dialog.
_SIGNATURES: Final = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"RIFF", "a RIFF file (WebP image, WAV audio...)"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive (or a document stored as one)"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"(\xb5/\xfd", "a zstd-compressed file"),
    (b"7z\xbc\xaf'\x1c", "a 7-Zip archive"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x7fELF", "an executable program"),
)


def binary_kind(head: bytes) -> str | None:
    """What the file starting with `head` is when it is binary ("a PNG image"); None: text."""
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    if b"\x00" in head:
        return "a binary file"
    # The bytes no character holds (a head cut inside a character adds at most 3).
    undecodable = len(head) - len(head.decode("utf-8", errors="ignore").encode("utf-8"))
    if undecodable > _UNDECODABLE_SHARE * len(head):
        return "a binary file"
    return None


def binary_problem(head: bytes) -> str | None:
    """The sentence refusing a binary file, or None when `head` looks like text."""
    kind = binary_kind(head)
    if kind is None:
        return None
    return (
        f"this is {kind}, not a transcript: choose the agent's transcript file "
        "(JSON lines or JSON text)"
    )
