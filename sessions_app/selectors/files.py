"""Files kept beside a session: the tool results offloaded from its runtime context."""

from __future__ import annotations

from compaction import BlobStoreError
from sessions_app.models import Session
from sessions_app.services.compacting.offloading import blob_store_for
from sessions_app.services.errors import NotFound

__all__ = ["offloaded_file"]


def offloaded_file(session: Session, name: str) -> bytes:
    """The bytes of the offloaded file `name` (`./` allowed in front) of `session`.

    NotFound for a name that cannot be read: not there, or outside the session's folder
    (a name like `../x` may fail in the storage with any OSError, so none tells more).
    """
    try:
        return blob_store_for(session).read(name.removeprefix("./"))
    except BlobStoreError as error:
        raise NotFound("no such offloaded content") from error
