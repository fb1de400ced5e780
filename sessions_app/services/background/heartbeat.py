"""The task workers' heartbeat: a small JSON file in the default storage.

Every `manage.py db_worker` rewrites it every CTXWEB_JOB_HEARTBEAT_SECONDS with its id, host,
pid and state (`polling`, `reconnecting`). The default storage is the one place every web
process and worker reads, on one machine (a folder of CTXWEB_DATA_DIR) or several (a
bucket), and needs no table. With several workers the newest beat wins: the file says that
some worker is alive, and which one wrote last. `GET /api/health` reports its age
(sessions_app.services.background.health).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.utils import timezone

__all__ = [
    "HEARTBEAT_NAME",
    "Heartbeat",
    "HeartbeatWriter",
    "read_worker_heartbeat",
    "write_worker_heartbeat",
]

#: Storage name of the heartbeat file.
HEARTBEAT_NAME: Final = "health/worker-heartbeat.json"


@dataclass(frozen=True)
class Heartbeat:
    """One worker's beat: who wrote it, where, in which state, and when."""

    worker_id: str
    host: str
    pid: int | None
    state: str
    at: datetime


def write_worker_heartbeat(
    worker_id: str, state: str, *, now: datetime | None = None, storage: Storage | None = None
) -> None:
    """Replace the heartbeat file by this worker's beat (raises the storage's errors)."""
    beat = {
        "worker_id": worker_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "state": state,
        "at": (now or timezone.now()).isoformat(),
    }
    _replace(storage or default_storage, HEARTBEAT_NAME, json.dumps(beat).encode())


def read_worker_heartbeat(storage: Storage | None = None) -> Heartbeat | None:
    """The last beat written, or None when there is none yet (or it is not a beat)."""
    store = storage or default_storage
    if not store.exists(HEARTBEAT_NAME):
        return None
    with store.open(HEARTBEAT_NAME, "rb") as handle:
        beat: Any = json.loads(handle.read())
    if not isinstance(beat, dict) or not isinstance(beat.get("at"), str):
        return None
    pid = beat.get("pid")
    return Heartbeat(
        worker_id=str(beat.get("worker_id", "")),
        host=str(beat.get("host", "")),
        pid=pid if isinstance(pid, int) else None,
        state=str(beat.get("state", "")),
        at=datetime.fromisoformat(beat["at"]),
    )


def _replace(storage: Storage, name: str, data: bytes) -> None:
    """Write `name` whole, replacing it; a reader never sees a half-written file."""
    try:
        path = Path(storage.path(name))
    except NotImplementedError:  # object storage (S3 and the like overwrite on save)
        saved = storage.save(name, ContentFile(data))
        if saved != name:  # a storage that keeps existing files: replace it by hand
            storage.delete(saved)
            storage.delete(name)
            storage.save(name, ContentFile(data))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)  # atomic on POSIX: the old beat or the new one, never none


class HeartbeatWriter:
    """A daemon thread writing the worker's heartbeat now and then every `interval` s.

    `state` is read at each beat. A failed write is logged once (until one works again),
    never raised: the worker goes on without it.
    """

    def __init__(
        self,
        worker_id: str,
        interval: float,
        state: Callable[[], str],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self.worker_id = worker_id
        self.interval = interval
        self.state = state
        self.on_error = on_error
        self._failing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def start(self) -> None:
        """Beat once now, then in the background."""
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        """Stop beating (the file then ages; the health check reports it stale)."""
        self._stop.set()

    def beat(self) -> None:
        """Write one beat; an error goes to `on_error` once until a write works again."""
        try:
            write_worker_heartbeat(self.worker_id, self.state())
        except Exception as error:  # any storage backend's failure: keep the worker running
            if not self._failing:
                self.on_error(error)
            self._failing = True
            return
        self._failing = False

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()
