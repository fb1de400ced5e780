"""Owner isolation: with another owner's ids, every endpoint and method answers 404.

The matrix covers the REST API (checked against the OpenAPI schema, so a new endpoint
cannot slip past it) and the pages. The intruder's requests change nothing of the owner's.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from sessions_app.models import Compaction, CompactionJob, Session

from ..deploy.integrity import context_fingerprint
from .conftest import ApiClient, World

#: (method, path template, body) of every API operation that takes an owned object's id.
API_MATRIX: list[tuple[str, str, Any]] = [
    ("GET", "/api/sessions/{session_id}", None),
    ("DELETE", "/api/sessions/{session_id}", None),
    (
        "POST",
        "/api/sessions/{session_id}/messages",
        {"messages": [{"role": "user", "content": "hi"}]},
    ),
    ("GET", "/api/sessions/{session_id}/history", None),
    ("GET", "/api/sessions/{session_id}/context", None),
    ("POST", "/api/sessions/{session_id}/context/prepare", {}),
    ("POST", "/api/sessions/{session_id}/check", {}),
    ("POST", "/api/sessions/{session_id}/offload", {"min_chars": 10}),
    ("POST", "/api/sessions/{session_id}/compactions", {}),
    ("POST", "/api/sessions/{session_id}/compactions", {"background": True}),
    ("POST", "/api/sessions/{session_id}/compactions", {"summary": "a caller's summary"}),
    ("GET", "/api/sessions/{session_id}/compactions", None),
    ("GET", "/api/sessions/{session_id}/compactions/{number}", None),
    ("POST", "/api/sessions/{session_id}/compactions/{number}/revert", {}),
    ("GET", "/api/sessions/{session_id}/export", None),
    ("GET", "/api/jobs/{job_id}", None),
]

#: Pages that show or change one owned object (GET unless said otherwise).
PAGE_MATRIX: list[tuple[str, str]] = [
    ("GET", "/sessions/{session_id}/"),
    ("GET", "/sessions/{session_id}/overview/"),
    ("GET", "/sessions/{session_id}/changes/?since=0.0.0"),
    ("GET", "/sessions/{session_id}/context.json"),
    ("GET", "/sessions/{session_id}/tabs/context/"),
    ("GET", "/sessions/{session_id}/tabs/history/"),
    ("GET", "/sessions/{session_id}/tabs/log/"),
    ("GET", "/sessions/{session_id}/tabs/compare/"),
    ("GET", "/sessions/{session_id}/history/"),
    ("GET", "/sessions/{session_id}/messages/?first=0&last=5"),
    ("GET", "/sessions/{session_id}/messages/0/"),
    ("GET", "/sessions/{session_id}/messages/0/path/"),
    ("GET", "/sessions/{session_id}/messages/{tool_seq}/tool-results/{tool_use_id}/"),
    ("GET", "/sessions/{session_id}/offloaded/tool-result-{tool_use_id}.md"),
    ("GET", "/sessions/{session_id}/compactions/{number}/summary/"),
    ("GET", "/sessions/{session_id}/compactions/{number}/originals/"),
    ("GET", "/sessions/{session_id}/compactions/{number}/compare/"),
    ("GET", "/sessions/{session_id}/compactions/{number}/lost/"),
    ("GET", "/sessions/{session_id}/compactions/{number}/path/"),
    ("POST", "/sessions/{session_id}/compactions/{number}/revert/"),
    ("POST", "/sessions/{session_id}/compact/preview/"),
    ("POST", "/sessions/{session_id}/compact/"),
    ("GET", "/sessions/{session_id}/jobs/{job_id}/"),
    ("POST", "/sessions/{session_id}/offload/"),
]


def _fill(template: str, world: World) -> str:
    return template.format(
        session_id=world.session.pk,
        number=world.compaction.number,
        job_id=world.job.pk,
        tool_use_id=world.tool_use_id,
        tool_seq=world.session.message_count - 1,
    )


def _owner_state(world: World) -> tuple[Any, ...]:
    session = Session.objects.get(pk=world.session.pk)
    return (
        session.version,
        session.context_revision,
        session.message_count,
        context_fingerprint(session),
        list(Compaction.objects.filter(session=session).values_list("number", "status")),
        CompactionJob.objects.filter(session=session).count(),
    )


@pytest.mark.parametrize(("method", "template", "body"), API_MATRIX)
def test_another_owner_s_ids_give_404_in_the_api(
    world: World, method: str, template: str, body: Any
) -> None:
    before = _owner_state(world)

    response = world.as_mallory.call(method, _fill(template, world), body)

    assert response.status_code == 404, response.content[:300]
    assert response.json()["detail"]
    assert _owner_state(world) == before


@pytest.mark.parametrize(("method", "template", "body"), API_MATRIX)
def test_the_owner_reaches_every_endpoint_of_the_matrix(
    world: World, method: str, template: str, body: Any
) -> None:
    # Same requests from the owner: not 404 (so the 404 above is isolation, not a bad URL).
    response = world.as_alice.call(method, _fill(template, world), body)

    assert response.status_code != 404, response.content[:300]
    assert response.status_code < 500


def test_the_matrix_covers_every_api_operation_with_an_id(world: World) -> None:
    schema = world.as_alice.get("/api/openapi.json").json()
    with_ids = {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        if "{" in path
        for method in operations
    }

    covered = {(method, template) for method, template, _ in API_MATRIX}

    assert with_ids - covered == set(), "add the new operations to API_MATRIX"


@pytest.mark.parametrize(("method", "template"), PAGE_MATRIX)
def test_another_owner_s_ids_give_404_in_the_pages(
    world: World, method: str, template: str
) -> None:
    browser = Client(enforce_csrf_checks=False)
    browser.force_login(world.mallory)
    before = _owner_state(world)

    url = _fill(template, world)
    response = browser.post(url, {}) if method == "POST" else browser.get(url)

    assert response.status_code == 404, response.content[:300]
    assert _owner_state(world) == before


@pytest.mark.parametrize(("method", "template"), PAGE_MATRIX)
def test_the_owner_reaches_every_page_of_the_matrix(
    world: World, method: str, template: str
) -> None:
    browser = Client(enforce_csrf_checks=False)
    browser.force_login(world.alice)
    headers = {"HX-Request": "true"}

    url = _fill(template, world)
    response = (
        browser.post(url, {}, headers=headers)
        if method == "POST"
        else browser.get(url, headers=headers)
    )

    assert response.status_code != 404, response.content[:300]
    assert response.status_code < 500


def test_the_session_list_shows_only_the_caller_s_sessions(world: World) -> None:
    mine = world.as_mallory.get("/api/sessions").json()
    theirs = world.as_alice.get("/api/sessions").json()

    assert mine["items"] == []
    assert [item["id"] for item in theirs["items"]] == [str(world.session.pk)]
    browser = Client()
    browser.force_login(world.mallory)
    page = browser.get("/").content.decode()
    assert str(world.session.pk) not in page
    assert world.session.title not in page


@pytest.mark.parametrize(
    ("method", "template", "body"),
    [
        *API_MATRIX,
        ("GET", "/api/sessions", None),
        ("POST", "/api/sessions", {}),
        ("POST", "/api/compact", {"messages": []}),
    ],
)
def test_every_api_operation_needs_authentication(
    world: World, method: str, template: str, body: Any
) -> None:
    before = _owner_state(world)

    response = world.anonymous.call(method, _fill(template, world), body)

    assert response.status_code == 401, response.content[:300]
    assert _owner_state(world) == before


def test_the_health_check_needs_no_authentication(world: World) -> None:
    assert world.anonymous.get("/api/health").status_code == 200


def test_a_malformed_id_is_404_not_500(world: World) -> None:
    for path in ("/api/sessions/not-a-uuid", "/api/jobs/not-a-uuid", "/api/sessions/..%2F..%2Fetc"):
        assert world.as_alice.get(path).status_code == 404, path


def test_no_api_path_answers_outside_the_matrix_for_an_intruder(world: World) -> None:
    # Every id-taking route of the URLconf must be in a matrix (API or pages).
    from django.urls import get_resolver

    templates = {re.sub(r"\{[^}]+\}", "X", t) for _, t, _ in API_MATRIX}
    templates |= {re.sub(r"\{[^}]+\}", "X", t.split("?")[0]) for _, t in PAGE_MATRIX}
    routes = []
    for pattern in get_resolver().url_patterns:
        prefix = str(pattern.pattern)
        for sub in getattr(pattern, "url_patterns", [pattern]):
            route = "/" + prefix + str(sub.pattern)
            # The proxy's ids (a model's name) are the upstream's, not an owned object's.
            if "<" in route and not route.startswith(("/admin", "/accounts", "/proxy/")):
                routes.append(re.sub(r"<[^>]+>", "X", route))

    missing = [route for route in routes if not any(_same_shape(route, t) for t in templates)]

    assert missing == [], "id-taking routes missing from the isolation matrices"


def _same_shape(route: str, template: str) -> bool:
    route_parts = route.strip("/").split("/")
    template_parts = template.strip("/").split("/")
    if len(route_parts) != len(template_parts):
        return False
    return all(
        a == b or a == "X" or b == "X" or "X" in a or "X" in b
        for a, b in zip(route_parts, template_parts, strict=True)
    )


def test_api_client_sends_the_bearer_key(world: World) -> None:
    assert ApiClient(world.alice_key).get("/api/sessions").status_code == 200
