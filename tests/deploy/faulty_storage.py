"""Django storages that fail the way real ones do: permission denied, disk full.

Configured in tests with `settings.STORAGES = {... "default": {"BACKEND": "tests.deploy.
faulty_storage.DiskFullStorage", "OPTIONS": {"location": ...}}}`. Reads work; every write
raises, after creating nothing.
"""

from __future__ import annotations

import errno
import os
from typing import IO, Any

from django.core.files.storage import FileSystemStorage

__all__ = ["DiskFullStorage", "PermissionDeniedStorage"]


class PermissionDeniedStorage(FileSystemStorage):
    """Every write fails with EACCES, like a read-only mount or a bucket without write rights."""

    def _save(self, name: str, content: IO[Any]) -> str:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), self.path(name))


class DiskFullStorage(FileSystemStorage):
    """Every write fails with ENOSPC, like a full disk."""

    def _save(self, name: str, content: IO[Any]) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path(name))
