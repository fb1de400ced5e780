"""`make run`'s server (`manage.py devserver`): the ASGI app with auto-reload, so a streamed
proxy answer reaches the client event by event, and the pages' static files are served."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from sessions_app.management.commands.devserver import parse_address
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return done.stdout


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"devserver exited with {server.returncode}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError("devserver did not answer")


def test_make_run_serves_the_asgi_app_with_the_devserver() -> None:
    run = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "manage.py devserver $(HOST):$(PORT)" in run
    assert "manage.py runserver" not in run


def test_parse_address() -> None:
    assert parse_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_address("8001") == ("127.0.0.1", 8001)
    assert parse_address("[::1]:8002") == ("::1", 8002)


@contextmanager
def devserver(tmp_path: Path, upstream_url: str) -> Iterator[tuple[str, str]]:
    """`make run`'s devserver on a free port (DEBUG on, a throwaway data directory, the
    Anthropic upstream at `upstream_url`): its base URL and a ctxweb key; stopped after."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "PYTEST_XDIST_WORKER"}}
    env.update(
        CTXWEB_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        DJANGO_DEBUG="1",
        PYTHONPATH=str(ROOT),
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server-key",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream_url,
    )
    _manage(env, "migrate", "--no-input")
    key = _manage(env, "create_api_key", "alice").strip().splitlines()[-1]
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "devserver", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the autoreloader's child is in its group
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/api/health", server)
        yield base, key
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


def test_streamed_answer_reaches_the_client_before_upstream_ends(tmp_path: Path) -> None:
    with StreamingAnthropic() as upstream, devserver(tmp_path, upstream.base_url) as (base, key):
        css = httpx.get(f"{base}/static/css/ctxweb.css", timeout=10)
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
        upstream.event_delay = 0.3
        upstream.script(Reply.text("twenty five characters..."))  # 9+ events
        body = {
            "model": "m",
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        }
        first: float | None = None
        url = f"{base}/proxy/anthropic/v1/messages"
        with httpx.stream("POST", url, json=body, headers={"x-api-key": key}, timeout=60) as r:
            assert r.status_code == 200
            for chunk in r.iter_raw():
                if chunk and first is None:
                    first = time.monotonic()
    sent = upstream.sent_at
    assert first is not None
    assert len(sent) >= 9
    # The first event reached the client well before upstream sent its last one.
    assert first < sent[-1] - 1.0
