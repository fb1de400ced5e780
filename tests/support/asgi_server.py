"""ctxweb's ASGI application served by uvicorn in a background thread, on 127.0.0.1.

    with AsgiServer() as server:
        httpx.get(f"{server.url}/proxy/...")

What pytest-django's `live_server` does for WSGI, for the ASGI app (streaming responses go
out as they are produced). The tests using it need `transactional_db`: the server's threads
use their own database connections, so the test's data must be committed.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Self

import uvicorn

__all__ = ["AsgiServer"]


class AsgiServer:
    """uvicorn serving `ctxweb.asgi:application` on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        from ctxweb.asgi import application

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # As gunicorn does: without it a response written in two parts (headers, body) waits
        # for the client's delayed ACK, about 40 ms per request (uvicorn sets no option on
        # a socket it is given).
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind(("127.0.0.1", 0))
        config = uvicorn.Config(application, lifespan="off", log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        """Serve in the background; returns once the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the ASGI test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
