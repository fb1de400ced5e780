"""With DEBUG on (`make run`), errors are the app's own pages too, never Django's technical
ones (issue 29 item 2); `make dev` (CTXWEB_DEBUG_PAGES) keeps Django's for debugging."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from django.test import Client

from sessions_app.services.sessions.lifecycle import create_session

pytestmark = pytest.mark.django_db

VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
#: What only Django's technical pages show.
TECHNICAL = ("Using the URLconf", "Django tried these URL patterns", "Traceback", "DEBUG = True")


@pytest.fixture
def debug(settings: Any) -> Any:
    settings.DEBUG = True
    settings.CTXWEB_DEBUG_PAGES = False
    return settings


@pytest.fixture
def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def assert_app_page(response: Any, status: int) -> None:
    html = response.content.decode()
    assert response.status_code == status
    assert f'data-status="{status}"' in html
    assert VIEWPORT in html  # not a 980 px layout on a phone
    for text in TECHNICAL:
        assert text not in html, text


@pytest.mark.usefixtures("debug")
def test_an_unknown_address_is_the_apps_404_with_debug_on(client_of: Client) -> None:
    assert_app_page(client_of.get("/no/such/page/"), 404)


@pytest.mark.usefixtures("debug")
def test_another_users_session_is_the_apps_404_with_debug_on(
    client_of: Client, other_user: Any
) -> None:
    theirs = create_session(other_user, title="Theirs")
    assert_app_page(client_of.get(f"/sessions/{theirs.pk}/"), 404)
    assert_app_page(client_of.get(f"/sessions/{uuid.uuid4()}/"), 404)


@pytest.mark.usefixtures("debug")
def test_a_missing_slash_still_redirects(client_of: Client) -> None:
    response = client_of.get("/import")
    assert response.status_code in {301, 302}
    assert response["Location"].endswith("/import/")


@pytest.mark.usefixtures("debug")
def test_a_crash_is_the_apps_500_with_the_traceback_in_the_log(
    client_of: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the list broke")

    monkeypatch.setattr("sessions_app.views.sessions_list.list_stamp", boom)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client_of.get("/")
    assert_app_page(response, 500)
    assert "the list broke" not in response.content.decode()
    logged = [r for r in caplog.records if r.name == "django.request"]
    assert logged
    assert logged[0].exc_info is not None
    assert "the list broke" in str(logged[0].exc_info[1])


@pytest.mark.usefixtures("debug")
def test_the_api_keeps_its_json_errors(client_of: Client) -> None:
    response = client_of.get("/api/no/such/thing")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")


def test_make_dev_shows_djangos_technical_page(client_of: Client, debug: Any) -> None:
    debug.CTXWEB_DEBUG_PAGES = True
    response = client_of.get("/no/such/page/")
    assert response.status_code == 404
    assert "Django tried these URL patterns" in response.content.decode()
