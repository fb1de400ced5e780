"""`manage.py devserver [HOST:PORT]`: the ASGI application (ctxweb/asgi.py) under uvicorn,
for development (`make run`).

What `runserver` does, served as in production: Django's autoreloader restarts the server
when Python code changes and reloads templates, WhiteNoise serves the static files (from
the source folders until `collectstatic` fills STATIC_ROOT), and a streamed answer (the
proxy's) reaches the client event by event; `runserver` (WSGI) sends it whole. The
listening socket is opened here with TCP_NODELAY, as gunicorn does (uvicorn sets no option
on a socket it is given: each response would wait about 40 ms for the client's delayed
ACK). `--noreload`: no autoreloader (one process).
"""

from __future__ import annotations

import socket
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import autoreload

__all__ = ["Command", "listening_socket", "parse_address"]

DEFAULT = "127.0.0.1:8000"


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `PORT` or `[IPv6]:PORT` as (host, port)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket whose accepted connections send small writes at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def serve(host: str, port: int) -> None:
    """Serve ctxweb's ASGI application until the process ends."""
    import uvicorn

    from ctxweb.asgi import application

    sock = listening_socket(host, port)
    config = uvicorn.Config(application, lifespan="on", log_level="info")
    uvicorn.Server(config).run(sockets=[sock])


class Command(BaseCommand):
    help = "Serve the ASGI app (streaming) with uvicorn, reloading on code changes."

    # The checks run once in the served process (as runserver).
    requires_system_checks: Any = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default=DEFAULT, help="HOST:PORT")
        parser.add_argument("--noreload", action="store_true", help="Do not auto-reload.")

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = parse_address(options["addrport"])
        if options["noreload"]:
            self._run(host, port)
        else:
            autoreload.run_with_reloader(self._run, host, port)

    def _run(self, host: str, port: int) -> None:
        autoreload.raise_last_exception()
        self.check(display_num_errors=False)
        self.stdout.write(f"ctxweb (ASGI, uvicorn) at http://{host}:{port}/", ending="\n")
        self.stdout.flush()
        serve(host, port)
