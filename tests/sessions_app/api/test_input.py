"""Request bodies: JSON objects only (400 otherwise), strict booleans and integers (422)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sessions_app.models import Compaction, Session
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db

NOT_OBJECTS = [
    pytest.param("[]", "an array", id="empty-array"),
    pytest.param('[{"title": "x"}]', "an array", id="array"),
    pytest.param("null", "null", id="null"),
    pytest.param('"text"', "a string", id="string"),
    pytest.param("3", "a number", id="number"),
    pytest.param("true", "a boolean", id="boolean"),
]


@pytest.mark.parametrize(("body", "kind"), NOT_OBJECTS)
def test_a_body_that_is_not_a_json_object_is_400(
    api_client: JsonClient, body: str, kind: str
) -> None:
    response = api_client.post("/api/sessions", body)

    assert response.status_code == 400
    assert (
        response.json()["detail"]
        == f"malformed JSON body: the body must be a JSON object, not {kind}"
    )
    assert not Session.objects.exists()


@pytest.mark.parametrize("path", ["check", "offload", "compactions"])
def test_optional_bodies_refuse_arrays_too(
    api_client: JsonClient, make_session: Callable[..., Session], path: str
) -> None:
    session = make_session()

    response = api_client.post(f"/api/sessions/{session.pk}/{path}", "[1]")

    assert response.status_code == 400
    assert not Compaction.objects.exists()


@pytest.mark.parametrize("path", ["check", "offload"])
def test_an_absent_optional_body_means_all_defaults(
    api_client: JsonClient, make_session: Callable[..., Session], path: str
) -> None:
    session = make_session()

    response = api_client.post(f"/api/sessions/{session.pk}/{path}", "")

    assert response.status_code == 200, response.content[:300]


def test_malformed_json_names_the_problem(api_client: JsonClient) -> None:
    response = api_client.post("/api/sessions", '{"title": ')

    assert response.status_code == 400
    assert response.json()["detail"].startswith("malformed JSON body: Expecting value")


LAX_VALUES = [
    pytest.param("", {"context_limit": True}, "context_limit", id="create-context_limit-bool"),
    pytest.param("", {"context_limit": "1000"}, "context_limit", id="create-context_limit-str"),
    pytest.param("", {"context_limit": 1000.0}, "context_limit", id="create-context_limit-float"),
    pytest.param("/{sid}/compactions", {"dry_run": 1}, "dry_run", id="compact-dry_run-int"),
    pytest.param(
        "/{sid}/compactions", {"background": "true"}, "background", id="compact-background-str"
    ),
    pytest.param("/{sid}/offload", {"min_chars": False}, "min_chars", id="offload-min_chars-bool"),
    pytest.param(
        "/{sid}/messages",
        {"messages": [{"role": "user", "content": "hi"}], "expected_version": "0"},
        "expected_version",
        id="append-expected_version-str",
    ),
]


@pytest.mark.parametrize(("path", "body", "field"), LAX_VALUES)
def test_numbers_and_booleans_are_not_interchangeable(
    api_client: JsonClient,
    make_session: Callable[..., Session],
    path: str,
    body: dict[str, Any],
    field: str,
) -> None:
    session = make_session()
    sessions = Session.objects.count()

    response = api_client.post("/api/sessions" + path.format(sid=session.pk), body)

    assert response.status_code == 422, response.content[:300]
    assert [problem["path"] for problem in response.json()["detail"]] == [field]
    assert Session.objects.count() == sessions
    assert not Compaction.objects.exists()


def test_the_stateless_compact_force_flag_is_a_boolean(api_client: JsonClient) -> None:
    messages = [{"role": "user", "content": "hi"}]

    response = api_client.post("/api/compact", {"messages": messages, "force": 0})

    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "force"
