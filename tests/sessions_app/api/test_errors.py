"""Every error under /api/ is JSON `{"detail": ...}` with the right status, DEBUG on or off.

Django answers some errors itself (an unknown path, a wrong method) with HTML, and an
exception nobody handled used to become Django's HTML 500 (or, with DEBUG on,
django-ninja's plain-text traceback). A database or storage failure is a 503 with
Retry-After: the client should try again, not report a bug.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, InterfaceError, OperationalError

from compaction import BlobStoreError, InvalidMessagesError, PolicyError
from compaction import Problem as EngineProblem
from sessions_app.api.throttling import SummarizerThrottle
from sessions_app.models import CompactionProfile, Session
from sessions_app.services.errors import (
    Conflict,
    InvalidInput,
    InvariantError,
    NotFound,
    Problem,
    Unavailable,
)
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db

DEBUG_ON_AND_OFF = pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])


def _json(response: Any, status: int) -> Any:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    body = response.json()
    assert "detail" in body
    return body


@DEBUG_ON_AND_OFF
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_unknown_api_path_is_a_json_404(
    api_client: JsonClient, settings: Any, debug: bool, method: str
) -> None:
    settings.DEBUG = debug

    response = getattr(api_client, method)("/api/no/such/endpoint")

    assert _json(response, 404)["detail"] == "no API endpoint at /api/no/such/endpoint"


@DEBUG_ON_AND_OFF
def test_a_wrong_method_is_a_json_405_with_allow(
    api_client: JsonClient, settings: Any, debug: bool
) -> None:
    settings.DEBUG = debug

    response = api_client.put("/api/sessions")

    _json(response, 405)
    assert "GET" in response["Allow"]


@DEBUG_ON_AND_OFF
@pytest.mark.parametrize(
    "error",
    [
        pytest.param(OperationalError("server closed the connection"), id="operational"),
        pytest.param(InterfaceError("connection already closed"), id="interface"),
    ],
)
def test_a_database_failure_is_503_with_retry_after(
    api_client: JsonClient,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    debug: bool,
    error: Exception,
) -> None:
    settings.DEBUG = debug

    def fail(user: Any) -> Any:
        raise error

    monkeypatch.setattr("sessions_app.api.sessions.owned_sessions", fail)

    response = api_client.get("/api/sessions")

    body = _json(response, 503)
    assert body["detail"].startswith("database unavailable")
    assert int(response["Retry-After"]) > 0


@DEBUG_ON_AND_OFF
def test_a_storage_failure_is_503_with_retry_after(
    api_client: JsonClient,
    make_session: Callable[..., Session],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    debug: bool,
) -> None:
    settings.DEBUG = debug
    session = make_session()

    def fail(*args: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/srv/ctxweb/data/blobs/x")

    monkeypatch.setattr("sessions_app.api.transfer.export_session", fail)

    response = api_client.get(f"/api/sessions/{session.pk}/export")

    body = _json(response, 503)
    assert body["detail"] == "storage unavailable: Permission denied"
    assert "/srv" not in body["detail"], "no server paths in answers"
    assert int(response["Retry-After"]) > 0


def test_a_concurrent_write_conflict_is_409(
    api_client: JsonClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise IntegrityError("duplicate key value violates unique constraint")

    monkeypatch.setattr("sessions_app.api.sessions.create_session", fail)

    _json(api_client.post("/api/sessions", {"title": "x"}), 409)


@DEBUG_ON_AND_OFF
def test_an_unhandled_exception_is_a_json_500_with_a_logged_traceback(
    api_client: JsonClient,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    debug: bool,
) -> None:
    settings.DEBUG = debug

    def fail(user: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("sessions_app.api.sessions.owned_sessions", fail)

    with caplog.at_level(logging.ERROR, logger="sessions_app"):
        response = api_client.get("/api/sessions")

    assert _json(response, 500) == {"detail": "internal server error"}
    logged = [r for r in caplog.records if r.exc_info and r.exc_info[0] is RuntimeError]
    assert logged, "the traceback is logged"


@DEBUG_ON_AND_OFF
def test_an_exception_escaping_django_ninja_is_json_too(
    api_client: JsonClient, settings: Any, monkeypatch: pytest.MonkeyPatch, debug: bool
) -> None:
    # Throttles run outside django-ninja's exception handling; a database cache failing
    # there reaches Django's own handling (sessions_app.middleware.ApiErrorMiddleware).
    settings.DEBUG = debug

    def fail(self: Any, request: Any) -> bool:
        raise OperationalError("no such table: ctxweb_cache")

    monkeypatch.setattr(SummarizerThrottle, "allow_request", fail)

    response = api_client.post("/api/compact", {"messages": [{"role": "user", "content": "hi"}]})

    assert _json(response, 503)["detail"].startswith("database unavailable")
    assert response["Retry-After"]


@DEBUG_ON_AND_OFF
def test_a_body_over_djangos_own_limit_is_413(
    api_client: JsonClient, settings: Any, debug: bool
) -> None:
    settings.DEBUG = debug
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    response = api_client.post("/api/sessions", {"title": "x" * 200})

    _json(response, 413)
    assert not Session.objects.exists()


@DEBUG_ON_AND_OFF
def test_the_usual_errors_are_json(
    api_client: JsonClient,
    anon_client: JsonClient,
    user: Any,
    settings: Any,
    debug: bool,
) -> None:
    settings.DEBUG = debug
    browser = JsonClient(enforce_csrf_checks=True)
    browser.force_login(user)

    assert _json(api_client.post("/api/sessions", "{oops"), 400)
    assert _json(anon_client.get("/api/sessions"), 401)
    assert _json(browser.post("/api/sessions", {"title": "x"}), 403)  # no CSRF token
    assert _json(api_client.get("/api/sessions/00000000-0000-0000-0000-000000000000"), 404)
    assert _json(api_client.post("/api/sessions", {"context_limit": -1}), 422)


@pytest.mark.parametrize(
    ("error", "status", "detail"),
    [
        pytest.param(
            InvalidInput([Problem("messages[2].content", "bad"), Problem("title", "long")]),
            422,
            [
                {"path": "messages[2].content", "message": "bad"},
                {"path": "title", "message": "long"},
            ],
            id="invalid-input",
        ),
        pytest.param(NotFound("no such thing"), 404, "no such thing", id="not-found"),
        pytest.param(Conflict("changed meanwhile"), 409, "changed meanwhile", id="conflict"),
        pytest.param(Unavailable("model down", retry_after=17), 503, "model down", id="503"),
    ],
)
def test_the_service_error_tree_is_mapped_once(
    api_client: JsonClient,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    status: int,
    detail: Any,
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr("sessions_app.api.sessions.create_session", fail)

    response = api_client.post("/api/sessions", {"title": "x"})

    assert _json(response, status)["detail"] == detail
    if status == 503:
        assert response["Retry-After"] == "17"


def test_a_conflict_naming_a_blocker_says_revert_first(
    api_client: JsonClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise Conflict("revert #2 first", blocking=2)

    monkeypatch.setattr("sessions_app.api.sessions.create_session", fail)

    response = api_client.post("/api/sessions", {"title": "x"})

    assert _json(response, 409) == {"detail": "revert #2 first", "revert_first": 2}


def test_a_broken_invariant_is_a_500_never_a_422(
    api_client: JsonClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise InvariantError("the engine reordered or repeated context entries")

    monkeypatch.setattr("sessions_app.api.sessions.create_session", fail)

    with caplog.at_level(logging.ERROR, logger="sessions_app"):
        response = api_client.post("/api/sessions", {"title": "x"})

    assert _json(response, 500)["detail"] == "internal server error"
    assert "reordered" in caplog.text


@pytest.mark.parametrize(
    ("engine", "status", "detail"),
    [
        pytest.param(
            PolicyError("cursor", "is not a cursor this API issued"),
            500,
            "internal server error",
            id="policy",
        ),
        pytest.param(
            InvalidMessagesError([EngineProblem("messages[0].role", "unknown role")]),
            500,
            "internal server error",
            id="messages",
        ),
        pytest.param(
            BlobStoreError("disk full"), 503, "storage unavailable: disk full", id="storage"
        ),
    ],
)
def test_an_engine_error_escaping_the_services_is_a_bug_but_storage_is_unavailable(
    api_client: JsonClient,
    monkeypatch: pytest.MonkeyPatch,
    engine: Exception,
    status: int,
    detail: Any,
) -> None:
    # Services translate the engine's errors (services/errors.py `engine_error`); one that
    # reaches a router untranslated is a bug, never a 422. A storage failure is an OSError:
    # 503, whoever raised it.
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise engine

    monkeypatch.setattr("sessions_app.api.sessions.create_session", fail)

    assert _json(api_client.post("/api/sessions", {"title": "x"}), status)["detail"] == detail


def test_an_invalid_stored_profile_is_a_422_naming_its_field(
    api_client: JsonClient, make_session: Any, make_profile: Any
) -> None:
    profile = make_profile("broken")
    CompactionProfile.objects.filter(pk=profile.pk).update(trigger_ratio=7)
    session = make_session(messages=[], profile=profile)

    detail = _json(api_client.get(f"/api/sessions/{session.pk}/context"), 422)["detail"]

    assert detail[0]["path"] == "trigger_ratio"
