"""The message keys the app reads (`usage`, `created_at`/`timestamp`) and `context_limit`:
checked before anything is written, 422 naming the field, never a 500.

A `usage` of the wrong type used to fail AFTER the append was stored (the post-call check
read it), so a client retrying the 500 stored its messages twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from sessions_app.models import Message, Session
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, user

pytestmark = pytest.mark.django_db


def _reply(**extra: Any) -> list[dict[str, Any]]:
    return [user("go on"), {**assistant("done"), **extra}]


@pytest.mark.parametrize(
    ("usage", "path"),
    [
        pytest.param({"input_tokens": "a"}, "messages[1].usage.input_tokens", id="string"),
        pytest.param({"output_tokens": 1.5}, "messages[1].usage.output_tokens", id="float"),
        pytest.param({"input_tokens": True}, "messages[1].usage.input_tokens", id="bool"),
        pytest.param({"input_tokens": [1]}, "messages[1].usage.input_tokens", id="list"),
        pytest.param({"input_tokens": -1}, "messages[1].usage.input_tokens", id="negative"),
        pytest.param(
            {"cache_read_input_tokens": 2**63},
            "messages[1].usage.cache_read_input_tokens",
            id="2**63",
        ),
        pytest.param({"total_tokens": 10**400}, "messages[1].usage.total_tokens", id="10**400"),
        pytest.param([1], "messages[1].usage", id="array"),
        pytest.param("many", "messages[1].usage", id="text"),
    ],
)
def test_a_bad_usage_is_refused_before_anything_is_stored(
    api_client: JsonClient, make_session: Callable[..., Session], usage: Any, path: str
) -> None:
    session = make_session()
    before = (Message.objects.filter(session=session).count(), session.version)

    response = api_client.post(
        f"/api/sessions/{session.pk}/messages", {"messages": _reply(usage=usage)}
    )

    assert response.status_code == 422, response.content[:300]
    assert [problem["path"] for problem in response.json()["detail"]] == [path]
    session.refresh_from_db()
    assert (Message.objects.filter(session=session).count(), session.version) == before


def test_a_good_usage_with_extra_keys_is_accepted(
    api_client: JsonClient, make_session: Callable[..., Session]
) -> None:
    session = make_session()
    usage = {
        "input_tokens": 2**63 - 1,
        "output_tokens": 0,
        "cache_creation_input_tokens": None,
        "service_tier": "standard",
        "server_tool_use": {"web_search_requests": 1},
    }

    response = api_client.post(
        f"/api/sessions/{session.pk}/messages", {"messages": _reply(usage=usage)}
    )

    assert response.status_code == 201, response.content[:300]
    session.refresh_from_db()
    assert session.last_usage is not None
    assert session.last_usage["service_tier"] == "standard"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("created_at", "0000-01-01T00:00:00Z", id="year-0"),
        pytest.param("created_at", "10000-01-01T00:00:00Z", id="year-10000"),
        pytest.param("created_at", "9999-12-31T23:59:59-10:00", id="year-10000-in-utc"),
        pytest.param("created_at", "0001-01-01T00:30:00+01:00", id="year-0-in-utc"),
        pytest.param("created_at", "2025-13-01T00:00:00Z", id="month-13"),
        pytest.param("created_at", "yesterday", id="garbage"),
        pytest.param("created_at", 1e300, id="huge-number"),
        pytest.param("created_at", 10**400, id="huger-number"),
        pytest.param("created_at", -1, id="before-the-epoch"),
        pytest.param("created_at", True, id="boolean"),
        pytest.param("created_at", {"at": 1}, id="object"),
        pytest.param("timestamp", "garbage", id="timestamp-garbage"),
    ],
)
@pytest.mark.parametrize("endpoint", ["create", "append"])
def test_an_unusable_time_is_422_naming_it(
    api_client: JsonClient,
    make_session: Callable[..., Session],
    key: str,
    value: Any,
    endpoint: str,
) -> None:
    message = {**user("hi"), key: value}
    if endpoint == "create":
        before = Session.objects.count()
        response = api_client.post("/api/sessions", {"messages": [message]})
        assert Session.objects.count() == before
    else:
        session = make_session(messages=[user("a"), assistant("b")])
        response = api_client.post(f"/api/sessions/{session.pk}/messages", {"messages": [message]})
        assert Message.objects.filter(session=session).count() == 2

    assert response.status_code == 422, response.content[:300]
    assert response.json()["detail"][0]["path"] == f"messages[0].{key}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2025-01-31T12:00:00Z", datetime(2025, 1, 31, 12, tzinfo=UTC), id="iso"),
        pytest.param("2025-01-31T12:00:00", datetime(2025, 1, 31, 12, tzinfo=UTC), id="naive"),
        pytest.param("2025-01-31", datetime(2025, 1, 31, tzinfo=UTC), id="date"),
        pytest.param(1_738_324_800, datetime(2025, 1, 31, 12, tzinfo=UTC), id="epoch-seconds"),
        pytest.param(
            "9999-12-31T23:59:59Z", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), id="last"
        ),
    ],
)
def test_a_usable_time_dates_the_message(
    api_client: JsonClient, value: Any, expected: datetime
) -> None:
    response = api_client.post("/api/sessions", {"messages": [{**user("hi"), "created_at": value}]})

    assert response.status_code == 201, response.content[:300]
    assert Message.objects.get(session_id=response.json()["id"]).created_at == expected


def test_a_null_time_means_now(api_client: JsonClient) -> None:
    response = api_client.post("/api/sessions", {"messages": [{**user("hi"), "timestamp": None}]})

    assert response.status_code == 201


@pytest.mark.parametrize(
    "limit", [0, -1, 1_000_000_001, 2**31, 2**63, 10**400], ids=lambda v: str(v)[:12]
)
def test_a_context_limit_out_of_bounds_is_422(api_client: JsonClient, limit: int) -> None:
    response = api_client.post("/api/sessions", {"context_limit": limit})

    assert response.status_code == 422, response.content[:300]
    assert response.json()["detail"][0]["path"] == "context_limit"
    assert not Session.objects.exists()


def test_the_largest_context_limit_is_accepted(api_client: JsonClient) -> None:
    response = api_client.post("/api/sessions", {"context_limit": 1_000_000_000})

    assert response.status_code == 201
    assert response.json()["context_limit"] == 1_000_000_000


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        pytest.param('{"context_limit": 1e400}', "policy.context_limit", id="infinite"),
        pytest.param('{"trigger_ratio": -1e400}', "policy.trigger_ratio", id="minus-infinite"),
        pytest.param('{"keep_recent_messages": -3}', "policy.keep_recent_messages", id="negative"),
        pytest.param('{"summary_max_tokens": "many"}', "policy.summary_max_tokens", id="string"),
    ],
)
def test_bad_policy_overrides_are_422(api_client: JsonClient, policy: str, path: str) -> None:
    body = '{"messages": [{"role": "user", "content": "hi"}], "policy": ' + policy + "}"

    response = api_client.post("/api/compact", body)

    assert response.status_code == 422, response.content[:300]
    assert response.json()["detail"][0]["path"] == path
