"""schemathesis against the live OpenAPI schema: every operation, all checks.

The schema is read from `/api/openapi.json` of the running app (through WSGI, so requests
share the test database). Every case is sent with alice's API key; path ids are replaced,
most of the time, by ids of alice's real objects so the fuzzing reaches past the 404s.
All of schemathesis's checks run: no 5xx, status codes and bodies as documented, and
`ignored_auth` re-sends successful requests without (and with a wrong) key expecting 401.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.config._checks import (
    POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES,
    PositiveDataAcceptanceConfig,
)

from sessions_app.models import Session
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import synthetic_history

from .conftest import World

pytestmark = pytest.mark.slow

#: Examples per operation and phase: enough to find crashes, small enough for `make test`.
MAX_EXAMPLES = 15


def _load_schema() -> Any:
    # Loaded at import, through WSGI: the schema view needs no database. (The lazy
    # `schemathesis.pytest.from_fixture` does not work with pytest 9: it reads a removed
    # private attribute of the test node.)
    from ctxweb.wsgi import application

    loaded = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
    loaded.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True)
    # Schema-valid input may still be refused with 422 for reasons JSON Schema cannot
    # express: a tool_result without its tool_use, roles out of order, a cursor this API
    # never issued. Every other check keeps its defaults.
    loaded.config.checks.positive_data_acceptance = PositiveDataAcceptanceConfig(
        expected_statuses=[*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, "422"]
    )
    return loaded


schema = _load_schema()

#: Operations that fail a check today, with why. Strict: a fix makes the test fail until
#: its entry is removed here.
KNOWN_DEFECTS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _no_throttling(settings: Any) -> None:
    """The fuzzing sends many wrong keys on purpose (ignored_auth): no throttling here."""
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 10**9


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Iterator[None]:
    """Requests go through the real WSGI handler, whose request signals close the database
    connection (and with it the test's transaction on PostgreSQL); Django's test Client
    disconnects the same handler."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _live_session(world: World) -> Session:
    """alice's session, or a fresh one when a fuzzed DELETE removed it."""
    if Session.objects.filter(pk=world.session.pk).exists():
        return world.session
    world.session = create_session(
        world.alice, title="recreated", messages=synthetic_history(20), context_limit=2000
    )
    return world.session


def _use_real_ids(case: Any, world: World) -> None:
    """Point three cases in four at alice's real objects (the rest keep generated ids)."""
    parameters = case.path_parameters or {}
    digest = hashlib.sha256(repr(sorted(parameters.items())).encode()).digest()
    if not parameters or digest[0] % 4 == 0:
        return
    if "session_id" in parameters:
        parameters["session_id"] = str(_live_session(world).pk)
    if "number" in parameters:
        parameters["number"] = world.compaction.number
    if "job_id" in parameters:
        parameters["job_id"] = str(world.job.pk)


@schema.parametrize()  # type: ignore[untyped-decorator]
@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
)
def test_api_conforms_to_its_schema(case: Any, world: World, request: Any) -> None:
    reason = KNOWN_DEFECTS.get(case.operation.label)
    if reason:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
    _use_real_ids(case, world)

    case.call_and_validate(headers={"Authorization": f"Bearer {world.alice_key}"})
