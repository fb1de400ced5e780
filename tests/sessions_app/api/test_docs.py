"""The OpenAPI docs page works offline under the strict Content-Security-Policy."""

from __future__ import annotations

import re

import pytest
from django.test import Client


@pytest.mark.django_db
def test_api_docs_load_their_assets_locally_with_no_inline_script(client: Client) -> None:
    response = client.get("/api/docs")

    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'<script[^>]*\bsrc="([^"]+)"', html)
    assert sources, "the docs page loads swagger-ui from script files"
    assert all(src.startswith("/static/") for src in sources)
    # Every script element either has a src or is inert JSON data: nothing inline runs.
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag or 'type="application/json"' in tag
    assert "script-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_openapi_schema_lists_the_session_endpoints(client: Client) -> None:
    schema = client.get("/api/openapi.json").json()

    assert "/api/sessions/{session_id}/context" in schema["paths"]
    assert "/api/compact" in schema["paths"]
