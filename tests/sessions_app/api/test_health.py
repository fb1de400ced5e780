"""`GET /api/health`: each dependency checked and reported; 503 when a required one fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from sessions_app.services.background.heartbeat import write_worker_heartbeat
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db

OK = {"status": "ok", "required": True, "detail": ""}


@contextmanager
def read_only_database() -> Iterator[None]:
    """The database refuses writes from here on, as a full disk or a standby does."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA query_only = ON")
        else:  # the rest of the test's own transaction is read-only
            cursor.execute("SET transaction_read_only = on")
    try:
        yield
    finally:
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA query_only = OFF")


def _unwritable_storage(settings: Any, tmp_path: Any) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "tests.deploy.faulty_storage.PermissionDeniedStorage",
            "OPTIONS": {"location": str(tmp_path / "blobs")},
        },
    }


def test_all_good_with_a_fresh_worker_heartbeat(anon_client: JsonClient) -> None:
    write_worker_heartbeat("worker-1", "polling", now=timezone.now() - timedelta(seconds=3))
    response = anon_client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"
    assert body["checks"]["database"] == body["checks"]["storage"] == OK
    worker = body["checks"]["worker"]
    assert (worker["status"], worker["required"], worker["state"]) == ("ok", False, "polling")
    assert 3 <= worker["age_seconds"] < 60


def test_without_a_worker_heartbeat_the_service_is_degraded(anon_client: JsonClient) -> None:
    body = anon_client.get("/api/health").json()
    assert body["status"] == "degraded"
    assert body["database"] == "ok"
    assert body["checks"]["worker"]["status"] == "absent"
    assert body["checks"]["worker"]["age_seconds"] is None


def test_a_stale_worker_heartbeat_is_reported(anon_client: JsonClient, settings: Any) -> None:
    settings.CTXWEB_JOB_STALE_SECONDS = 60
    write_worker_heartbeat("worker-1", "reconnecting", now=timezone.now() - timedelta(minutes=5))
    response = anon_client.get("/api/health")
    assert response.status_code == 200, "the worker is not required"
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["worker"]["status"] == "stale"
    assert body["checks"]["worker"]["state"] == "reconnecting"
    assert body["checks"]["worker"]["age_seconds"] >= 300


def test_a_database_that_answers_but_refuses_writes_is_503(
    anon_client: JsonClient, caplog: pytest.LogCaptureFixture
) -> None:
    with read_only_database():
        response = anon_client.get("/api/health")
    assert response.status_code == 503
    body = response.json()
    assert body["detail"] == "database unreachable"
    assert (body["status"], body["database"]) == ("error", "error")
    assert body["checks"]["database"]["status"] == "error"
    assert body["checks"]["storage"] == OK
    assert "the database is unavailable" in caplog.text


def test_a_storage_that_refuses_writes_is_503(
    anon_client: JsonClient, settings: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _unwritable_storage(settings, tmp_path)
    response = anon_client.get("/api/health")
    assert response.status_code == 503
    body = response.json()
    assert body["detail"] == "storage unavailable"
    assert body["database"] == "ok"
    assert body["checks"]["storage"] == {
        "status": "error",
        "required": True,
        "detail": "could not write and delete a file",
    }
    assert "Permission denied" in caplog.text, "the error's text goes to the log only"
    assert "Permission denied" not in response.content.decode()


def test_both_failing_are_both_named(anon_client: JsonClient, settings: Any, tmp_path: Any) -> None:
    _unwritable_storage(settings, tmp_path)
    with read_only_database():
        response = anon_client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["detail"] == "database unreachable; storage unavailable"


def test_the_probe_leaves_no_file_behind(anon_client: JsonClient, tmp_path: Any) -> None:
    assert anon_client.get("/api/health").status_code == 200
    probes = tmp_path / "blobs" / "health"
    assert not probes.exists() or list(probes.iterdir()) == []


def test_the_check_is_cheap(anon_client: JsonClient, django_assert_max_num_queries: Any) -> None:
    # One UPDATE matching no row; in a test its transaction is a savepoint (SAVEPOINT, the
    # UPDATE, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT).
    with django_assert_max_num_queries(4):
        assert anon_client.get("/api/health").status_code == 200
