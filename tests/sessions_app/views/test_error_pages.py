"""404 and 500 are the site's own pages (with DEBUG off), never Django's plain ones."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client, RequestFactory
from django.views.defaults import server_error

pytestmark = pytest.mark.django_db


def test_unknown_session_is_the_sites_404_page(user: Any, settings: Any) -> None:
    settings.DEBUG = False
    client = Client()
    client.force_login(user)
    response = client.get(f"/sessions/{uuid.uuid4()}/")
    assert response.status_code == 404
    assert [t.name for t in response.templates][:2] == ["404.html", "base.html"]
    html = response.content.decode()
    assert 'data-status="404"' in html
    assert 'class="topbar"' in html  # the site's layout, with its navigation
    assert user.get_username() in html
    assert "Back to the sessions" in html
    assert "Traceback" not in html
    assert "Page not found at" not in html


def test_unknown_address_is_the_404_page_too(user: Any, settings: Any) -> None:
    settings.DEBUG = False
    client = Client()
    client.force_login(user)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert 'data-status="404"' in response.content.decode()


def test_server_error_page_renders_without_a_request_context(settings: Any) -> None:
    settings.DEBUG = False
    response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    html = response.content.decode()
    assert 'data-status="500"' in html
    assert 'class="topbar"' in html
    assert "Something went wrong" in html
