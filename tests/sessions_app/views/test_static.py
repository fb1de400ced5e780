"""Static files are served by the app itself (whitenoise), also with DEBUG off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

ASSETS = ("/static/css/ctxweb.css", "/static/js/ctxweb.js", "/static/vendor/htmx-2.0.11.min.js")


def fetch(path: str) -> Any:
    response: Any = Client().get(path)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body


@override_settings(DEBUG=False, WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=False)
def test_assets_served_with_debug_off_from_the_finders() -> None:
    for path in ASSETS:
        response, body = fetch(path)
        assert response.status_code == 200, path
        assert body
    css, body = fetch(ASSETS[0])
    assert css["Content-Type"].startswith("text/css")
    assert b".marker" in body


def test_assets_served_with_debug_off_after_collectstatic(tmp_path: Path) -> None:
    with override_settings(
        DEBUG=False,
        STATIC_ROOT=str(tmp_path),
        WHITENOISE_USE_FINDERS=False,
        WHITENOISE_AUTOREFRESH=False,
    ):
        call_command("collectstatic", interactive=False, verbosity=0)
        for path in ASSETS:
            response, _ = fetch(path)
            assert response.status_code == 200, path


def test_pages_use_local_assets_only(client: Client, user: Any) -> None:
    client.force_login(user)
    html = client.get("/").content.decode()
    assert "/static/vendor/htmx-2.0.11.min.js" in html
    assert "/static/css/ctxweb.css" in html
    assert "https://" not in html.split("<body", 1)[0]
