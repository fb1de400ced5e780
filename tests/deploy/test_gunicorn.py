"""The production server: gunicorn with ctxweb/gunicorn.conf.py, static files by whitenoise."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path

import pytest

from .conftest import PROXIED, Gunicorn, Processes, query, wait_for

pytestmark = pytest.mark.slow


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_gunicorn_serves_the_app_and_whitenoise_the_static_files(
    tmp_path: Path, gunicorn: Gunicorn, processes: Processes
) -> None:
    port = gunicorn(f"sqlite:///{tmp_path / 'db.sqlite3'}", workers=2, collectstatic=True).port

    status, headers, body = _get(port, "/api/health", PROXIED)
    health = json.loads(body)
    assert (status, health["status"], health["database"]) == (200, "degraded", "ok"), "no worker"
    assert health["checks"]["storage"]["status"] == "ok"
    assert "max-age=31536000" in headers["strict-transport-security"]

    status, headers, _ = _get(port, "/api/health", {"Host": "127.0.0.1"})
    assert status == 301, "plain HTTP redirects"
    assert headers["location"].startswith("https://")

    status, headers, body = _get(
        port, "/static/css/ctxweb.css", {**PROXIED, "Accept-Encoding": "gzip"}
    )
    assert status == 200
    assert headers["content-type"].startswith("text/css")
    assert headers.get("content-encoding") == "gzip", "whitenoise serves the compressed copy"
    assert body[:2] == b"\x1f\x8b"

    status, _, _ = _get(
        port, "/api/health", {"Host": "evil.example.org", "X-Forwarded-Proto": "https"}
    )
    assert status == 400, "hosts outside DJANGO_ALLOWED_HOSTS are refused"

    access = '"GET /static/css/ctxweb.css HTTP/1.1" 200'

    def logged() -> bool:
        log = processes.log("gunicorn")
        return access in log and log.count("Booting worker") >= 2

    wait_for(logged, 10, "the access log line and two booted workers in gunicorn's log")
    assert processes.log("gunicorn").count("Booting worker") == 2


@pytest.mark.postgres
def test_under_asgi_postgresql_connections_stay_within_the_pool(
    gunicorn: Gunicorn, pg_database: str
) -> None:
    """Each ASGI request runs in a thread of its own: with persistent connections every
    request left one open (until the garbage collector ran) and a busy server exhausted
    PostgreSQL's max_connections. The pool bounds them, whatever CTXWEB_CONN_MAX_AGE says."""
    served = gunicorn(
        pg_database, seed_user="pooled", CTXWEB_CONN_MAX_AGE="60", CTXWEB_DB_POOL_SIZE="3"
    )
    port, key = served.port, served.key

    name = pg_database.rsplit("/", 1)[1]
    count = (
        "SELECT count(*) FROM pg_stat_activity "
        f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    )
    statuses: list[int] = []
    most = 0

    def client() -> None:
        for _ in range(6):
            status, _, _ = _get(
                port, "/api/sessions", {**PROXIED, "Authorization": f"Bearer {key}"}
            )
            statuses.append(status)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        most = max(most, query(pg_database, count)[0][0])
        time.sleep(0.05)
    most = max(most, query(pg_database, count)[0][0])
    assert statuses == [200] * 48
    assert 1 <= most <= 3, f"{most} connections open for a pool of 3"
