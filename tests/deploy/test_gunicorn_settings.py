"""ctxweb/gunicorn.conf.py's defaults that bench/load.py measured (docs/deployment.md,
section 3): the application loaded once before forking, and no recycled processes."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

CONF = Path(__file__).resolve().parents[2] / "ctxweb" / "gunicorn.conf.py"


def _settings(monkeypatch: pytest.MonkeyPatch, **environ: str) -> dict[str, Any]:
    for name in ("CTXWEB_WEB_PRELOAD", "CTXWEB_WEB_MAX_REQUESTS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(CONF))


def test_by_default_the_app_is_preloaded_and_no_process_is_recycled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = _settings(monkeypatch)
    assert found["preload_app"] is True
    assert (found["max_requests"], found["max_requests_jitter"]) == (0, 0)


def test_both_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _settings(monkeypatch, CTXWEB_WEB_PRELOAD="0", CTXWEB_WEB_MAX_REQUESTS="5000")
    assert found["preload_app"] is False
    assert (found["max_requests"], found["max_requests_jitter"]) == (5000, 500)
