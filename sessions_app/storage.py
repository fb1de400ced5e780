"""`DjangoStorageBlobStore`: the engine's BlobStore protocol over Django's storage API.

Offloaded tool results and other engine blobs go to the default storage (a directory under
CTXWEB_DATA_DIR by default, any Django storage backend in production) below a per-session
prefix, so nothing an engine step writes can land outside it. Nothing stored is ever replaced:
`create` (the engine's `ExclusiveBlobStore`) refuses a taken name, `write` takes a free one next
to it. `save_new` (also used for compaction archives) asks the storage whether a name is taken
before it saves, whatever the backend's overwrite setting (django-storages' S3 backend replaces
by default); FileSystemStorage also creates with `O_EXCL`, while on S3 two writers racing for
one name between the check and the save can still replace each other (docs/deployment.md).
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import PurePosixPath
from typing import Any, Final

from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.utils.crypto import get_random_string

from compaction import BlobStoreError

__all__ = ["BLOB_PREFIX", "DjangoStorageBlobStore", "delete_stored_quietly", "save_new"]

logger = logging.getLogger("sessions_app")

#: Top folder of engine blobs in the default storage: `<BLOB_PREFIX>/<session id>/<name>`.
BLOB_PREFIX: Final = "offload"


class DjangoStorageBlobStore:
    """Blobs as files of a Django storage, below `prefix`; unsafe names are refused and no
    stored blob is ever replaced (an `ExclusiveBlobStore`)."""

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
        """Store `data` under `name`, or under a free name next to it when `name` is taken
        (nothing stored is ever replaced); the location is a local path or a URL."""
        return self.location(self._save(self.name_for(name), data))

    def create(self, name: str, data: bytes) -> str | None:
        """Store `data` under exactly `name` unless something is there already (then None).

        The exclusive creation of `ExclusiveBlobStore`: `Storage.save` never replaces a file
        (FileSystemStorage opens with `O_EXCL` and moves on to a free name), so a blob that
        appeared between the `exists` check and the save makes the save land elsewhere: that
        copy is deleted again and the name counts as taken.
        """
        target = self.name_for(name)
        try:
            if self.storage.exists(target):
                return None
        except (OSError, SuspiciousFileOperation) as error:
            raise BlobStoreError(f"could not check {target}: {error}") from error
        stored = self._save(target, data)
        if stored != target:  # another writer created `target` meanwhile
            delete_stored_quietly(stored, self.storage)
            return None
        return self.location(stored)

    def _save(self, target: str, data: bytes) -> str:
        try:
            return save_new(target, ContentFile(data), self.storage)
        except (OSError, SuspiciousFileOperation) as error:
            raise BlobStoreError(f"could not write {target}: {error}") from error

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


def save_new(name: str, content: File[Any], storage: Storage | None = None) -> str:
    """Save `content` under `name`, or under a free name next to it when `name` is taken
    (Django's `_<7 random characters>` before the extension); the stored name.

    Never replaces a stored file, whatever the backend's overwrite setting: the storage is
    asked with `exists` before the save (django-storages' S3 backend, by default, saves under
    the name given even when it is taken).
    """
    store = storage or default_storage
    folder, file_name = posixpath.split(name)
    extension = "".join(PurePosixPath(file_name).suffixes)
    root = file_name.removesuffix(extension)
    free = name
    while store.exists(free):
        free = posixpath.join(folder, f"{root}_{get_random_string(7)}{extension}")
    return str(store.save(free, content))


def delete_stored_quietly(storage_name: str, storage: Storage | None = None) -> None:
    """Delete a file of `storage` (the default storage when None); a failure is logged, never
    raised (best effort)."""
    try:
        (storage or default_storage).delete(storage_name)
    except OSError:
        logger.warning(
            "could not delete a stored file", exc_info=True, extra={"file": storage_name}
        )
