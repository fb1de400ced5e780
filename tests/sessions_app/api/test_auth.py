"""API authentication: Bearer keys, browser sessions with CSRF, 401s, throttling, body limits."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test import Client
from django.utils import timezone

from sessions_app.models import ApiKey, Session
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db

#: (method, path) of every authenticated endpoint; {sid} is a real session id.
ENDPOINTS = [
    ("get", "/api/sessions"),
    ("post", "/api/sessions"),
    ("get", "/api/sessions/{sid}"),
    ("delete", "/api/sessions/{sid}"),
    ("post", "/api/sessions/{sid}/messages"),
    ("get", "/api/sessions/{sid}/history"),
    ("get", "/api/sessions/{sid}/context"),
    ("post", "/api/sessions/{sid}/context/prepare"),
    ("post", "/api/sessions/{sid}/check"),
    ("post", "/api/sessions/{sid}/compactions"),
    ("get", "/api/sessions/{sid}/compactions"),
    ("get", "/api/sessions/{sid}/compactions/1"),
    ("post", "/api/sessions/{sid}/compactions/1/revert"),
    ("post", "/api/sessions/{sid}/offload"),
    ("get", "/api/jobs/00000000-0000-0000-0000-000000000000"),
    ("post", "/api/compact"),
]


def call(client: Client, method: str, path: str, body: Any = None) -> Any:
    if method == "post":
        return client.post(path, body or {}, content_type="application/json")
    return getattr(client, method)(path)


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_missing_credentials_are_401_everywhere(
    anon_client: JsonClient, make_session: Any, method: str, path: str
) -> None:
    session = make_session(messages=[{"role": "user", "content": "hi"}])
    response = call(anon_client, method, path.format(sid=session.pk))
    assert response.status_code == 401
    assert "detail" in response.json()
    assert Session.objects.filter(pk=session.pk).exists()


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_a_bad_key_is_401_everywhere(make_session: Any, method: str, path: str) -> None:
    session = make_session(messages=[{"role": "user", "content": "hi"}])
    client = JsonClient("ctx_000000000000_not-a-real-secret")
    assert call(client, method, path.format(sid=session.pk)).status_code == 401


def test_health_needs_no_credentials(anon_client: JsonClient) -> None:
    response = anon_client.get("/api/health")
    assert response.status_code == 200
    assert response.json()["database"] == "ok"  # the full body: test_api_health.py


def test_health_logs_and_answers_503_when_the_database_fails(
    anon_client: JsonClient, caplog: pytest.LogCaptureFixture
) -> None:
    def unreachable(*_: Any) -> None:
        raise OperationalError("simulated: connection refused")

    with connection.execute_wrapper(unreachable), caplog.at_level(logging.ERROR, "sessions_app"):
        response = anon_client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["detail"] == "database unreachable"
    assert "simulated: connection refused" in caplog.text


def test_a_valid_key_works_and_records_its_use(api_client: JsonClient, user: Any) -> None:
    assert api_client.get("/api/sessions").status_code == 200
    row = ApiKey.objects.get(user=user)
    assert row.last_used_at is not None


def test_a_key_with_the_right_prefix_but_wrong_secret_is_refused(api_key: str, user: Any) -> None:
    tampered = api_key[:-3] + ("aaa" if not api_key.endswith("aaa") else "bbb")
    assert JsonClient(tampered).get("/api/sessions").status_code == 401


def test_a_revoked_key_is_refused(api_key: str, user: Any) -> None:
    ApiKey.objects.filter(user=user).update(revoked_at=timezone.now())
    assert JsonClient(api_key).get("/api/sessions").status_code == 401


def test_a_malformed_authorization_header_is_401(db: Any) -> None:
    client = Client(HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert client.get("/api/sessions").status_code == 401


def test_only_the_key_hash_is_stored(api_key: str, user: Any) -> None:
    row = ApiKey.objects.get(user=user)
    assert api_key not in (row.key_hash, row.lookup)
    assert row.key_hash == ApiKey.hash_key(api_key)


def test_a_logged_in_browser_session_works_for_reads(user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/sessions").status_code == 200


def test_a_browser_session_needs_the_csrf_token_on_unsafe_methods(user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    refused = client.post("/api/sessions", {"title": "x"}, content_type="application/json")
    assert refused.status_code == 403
    assert not Session.objects.exists()
    client.get("/admin/login/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        "/api/sessions", {"title": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 201


def test_repeated_bad_keys_are_throttled(db: Any, settings: Any, api_key: str) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 3
    bad = JsonClient("ctx_000000000000_wrong")
    statuses = [bad.get("/api/sessions").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    assert bad.get("/api/sessions")["Retry-After"] == str(
        settings.CTXWEB_AUTH_FAILURE_WINDOW_SECONDS
    )
    # Only failures are throttled: a valid key from the same client always passes.
    assert JsonClient(api_key).get("/api/sessions").status_code == 200


def test_a_body_over_the_limit_is_413_and_stores_nothing(
    api_client: JsonClient, settings: Any
) -> None:
    settings.CTXWEB_MAX_BODY_BYTES = 1000
    response = api_client.post("/api/sessions", {"title": "x" * 2000})
    assert response.status_code == 413
    assert "detail" in response.json()
    assert not Session.objects.exists()


def test_malformed_json_is_400(api_client: JsonClient) -> None:
    response = api_client.post("/api/sessions", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert not Session.objects.exists()
