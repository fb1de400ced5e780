"""`DjangoStorageBlobStore`: the engine's BlobStore protocol over Django's storage API.

Offloaded tool results and other engine blobs go to the default storage (a directory under
CTXWEB_DATA_DIR by default, any Django storage backend in production) below a per-session
prefix, so nothing an engine step writes can land outside it.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Final

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage

from compaction import BlobStoreError

__all__ = ["BLOB_PREFIX", "DjangoStorageBlobStore", "delete_stored_quietly"]

logger = logging.getLogger("sessions_app")

#: Top folder of engine blobs in the default storage: `<BLOB_PREFIX>/<session id>/<name>`.
BLOB_PREFIX: Final = "offload"


class DjangoStorageBlobStore:
    """Blobs as files of a Django storage, below `prefix`; unsafe names are refused."""

    def __init__(self, prefix: str, storage: Storage | None = None) -> None:
        self.prefix = prefix.strip("/")
        self.storage = storage or default_storage

    def name_for(self, name: str) -> str:
        """The storage name for the relative blob `name` (refusing absolute or `..` names)."""
        if not name or "\x00" in name or name.startswith(("/", "\\")):
            raise BlobStoreError(f"unsafe blob name {name!r}")
        joined = posixpath.normpath(posixpath.join(self.prefix, name.replace("\\", "/")))
        if not joined.startswith(f"{self.prefix}/"):
            raise BlobStoreError(f"blob name {name!r} leaves {self.prefix}")
        return joined

    def write(self, name: str, data: bytes) -> str:
        """Store `data` under `name` (replacing it); the location is a local path or a URL."""
        target = self.name_for(name)
        try:
            if self.storage.exists(target):
                self.storage.delete(target)
            stored = self.storage.save(target, ContentFile(data))
        except (OSError, SuspiciousFileOperation) as error:
            raise BlobStoreError(f"could not write {target}: {error}") from error
        return self.location(stored)

    def exists(self, name: str) -> bool:
        """True when something is stored under `name`."""
        try:
            return bool(self.storage.exists(self.name_for(name)))
        except (OSError, SuspiciousFileOperation) as error:
            raise BlobStoreError(f"could not check {name}: {error}") from error

    def read(self, name: str) -> bytes:
        """The bytes stored under `name`."""
        try:
            with self.storage.open(self.name_for(name), "rb") as handle:
                data: bytes = handle.read()
        except (OSError, SuspiciousFileOperation) as error:
            raise BlobStoreError(f"could not read {name}: {error}") from error
        return data

    def location(self, stored: str) -> str:
        """Where a stored name can be read: a local path when the storage has one, else a URL."""
        try:
            return str(self.storage.path(stored))
        except NotImplementedError:
            return str(self.storage.url(stored))


def delete_stored_quietly(storage_name: str) -> None:
    """Delete a file of the default storage; a failure is logged, never raised (best effort)."""
    try:
        default_storage.delete(storage_name)
    except OSError:
        logger.warning(
            "could not delete a stored file", exc_info=True, extra={"file": storage_name}
        )
