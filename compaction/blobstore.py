"""The blob store protocol, and a local-directory implementation that never escapes its root.

A store may also offer `create(name, data)`: write only when nothing is stored under `name`
yet (an exclusive creation, so two writers can never replace each other's blob). Offloading
uses it when present (`ExclusiveBlobStore`), else checks `exists` before `write`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from .errors import BlobStoreError

__all__ = ["BlobStore", "ExclusiveBlobStore", "LocalBlobStore"]


class BlobStore(Protocol):
    """Where archives and offloaded contents are written: relative names in, locations out."""

    def write(self, name: str, data: bytes) -> str:
        """Store `data` under the relative `name`; return its location (a path or URL)."""
        ...

    def exists(self, name: str) -> bool:
        """True when something is stored under `name`."""
        ...


@runtime_checkable
class ExclusiveBlobStore(BlobStore, Protocol):
    """A BlobStore that can create a blob without ever replacing one."""

    def create(self, name: str, data: bytes) -> str | None:
        """Store `data` under `name` unless something is there already (then None)."""
        ...


class LocalBlobStore:
    """Blobs as files below `root`; names with `..` or absolute paths are refused."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path(self, name: str) -> Path:
        """The absolute path for `name`, refusing any name that would leave the root."""
        if not name or "\x00" in name or os.path.isabs(name):
            raise BlobStoreError(f"unsafe blob name {name!r}")
        target = (self.root / name).resolve()
        if not target.is_relative_to(self.root):
            raise BlobStoreError(f"blob name {name!r} leaves {self.root}")
        return target

    def write(self, name: str, data: bytes) -> str:
        target = self.path(name)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as error:
            raise BlobStoreError(f"could not write {target}: {error}") from error
        return str(target)

    def create(self, name: str, data: bytes) -> str | None:
        """Write `data` to a new file `name`; None when the file exists (it is left alone)."""
        target = self.path(name)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("xb") as handle:  # O_EXCL: an existing file is never replaced
                try:
                    handle.write(data)
                except BaseException:
                    target.unlink(missing_ok=True)  # no half-written blob stays behind
                    raise
        except FileExistsError:
            return None
        except OSError as error:
            raise BlobStoreError(f"could not write {target}: {error}") from error
        return str(target)

    def exists(self, name: str) -> bool:
        return self.path(name).exists()
