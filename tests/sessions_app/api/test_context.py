"""`/context`, `/context/prepare`, `/check`, `/offload` over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import Compaction, ContextEntry
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, exchange, user

pytestmark = pytest.mark.django_db


def test_context_returns_the_anthropic_payload(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(
        messages=[{"role": "system", "content": "sys"}, user("hi"), assistant("yo")],
        context_limit=1000,
    )
    body = api_client.get(f"/api/sessions/{session.pk}/context").json()
    assert set(body) == {"system", "messages", "tokens", "limit", "usage"}
    assert body["system"] == "sys"
    assert len(body["messages"]) == 2
    assert body["tokens"] == session.context_tokens
    assert body["limit"] == 1000


def test_context_in_openai_format(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(messages=[{"role": "system", "content": "sys"}, user("hi")])
    body = api_client.get(f"/api/sessions/{session.pk}/context?format=openai").json()
    assert body["messages"][0] == {"role": "system", "content": "sys"}


def test_an_unknown_format_is_422(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(messages=[user("hi")])
    response = api_client.get(f"/api/sessions/{session.pk}/context?format=xml")
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "format"


def test_check_returns_the_five_keys(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(messages=[user("hi")], context_limit=1000)
    body = api_client.post(f"/api/sessions/{session.pk}/check").json()
    assert {"should_compact", "tokens", "threshold", "limit", "usage"} <= set(body)
    assert body["threshold"] == 920
    assert body["should_compact"] is False
    named = api_client.post(f"/api/sessions/{session.pk}/check", {"profile": "auto-compression"})
    assert named.json()["threshold"] == 800
    bad = api_client.post(f"/api/sessions/{session.pk}/check", {"profile": "nope"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["path"] == "profile"


def test_prepare_compacts_when_over_and_returns_the_context(
    api_client: JsonClient, make_session: Any, make_profile: Any, conversation: Any, scripted: Any
) -> None:
    scripted(default="Goals and key decisions:\n- go on")
    profile = make_profile(  # compacts in the request (prepared: test_prepared_compaction)
        keep_recent_messages=4,
        steps=["summary"],
        context_limit=2500,
        hard_limit=3000,
        prepare_at=None,
    )
    session = make_session(messages=conversation(12), profile=profile)
    response = api_client.post(f"/api/sessions/{session.pk}/context/prepare")
    assert response.status_code == 200
    body = response.json()
    assert body["compaction"]["trigger"] == "auto"
    assert body["compaction"]["number"] == 1
    assert body["tokens"] < session.context_tokens
    assert Compaction.objects.filter(session=session, status="succeeded").count() == 1


def test_prepare_under_the_threshold_just_returns_the_context(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(messages=[user("hi")])
    body = api_client.post(f"/api/sessions/{session.pk}/context/prepare").json()
    assert body["compaction"] is None
    assert body["skipped"] == "below_threshold"
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_offload_over_http(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(
        messages=[user("go"), *exchange("t1", result="x" * 500), assistant("ok")]
    )
    response = api_client.post(f"/api/sessions/{session.pk}/offload", {"min_chars": 100})
    assert response.status_code == 200
    assert response.json()["offloaded_count"] == 1
    assert ContextEntry.objects.filter(session=session, content__isnull=False).count() == 1
    bad = api_client.post(f"/api/sessions/{session.pk}/offload", {"min_chars": -1})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["path"] == "min_chars"


def test_check_reads_the_session_once_and_sees_appends_and_the_overhead(
    api_client: JsonClient, make_session: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.models import Session
    from sessions_app.services.sessions.lifecycle import append_messages

    session = make_session(messages=[user("hi")], context_limit=1000)
    url = f"/api/sessions/{session.pk}/check"
    first = api_client.post(url).json()["tokens"]
    append_messages(session, [assistant("a longer answer than the question was")])
    Session.objects.filter(pk=session.pk).update(proxy_state={"system_tokens": 7})
    with CaptureQueriesContext(connection) as queries:
        tokens = api_client.post(url).json()["tokens"]
    session.refresh_from_db()
    assert tokens == session.context_tokens + 7 > first + 7
    assert sum('FROM "sessions_app_session"' in q["sql"] for q in queries) == 1


def test_context_of_a_session_with_its_own_limit_reads_no_profile(
    api_client: JsonClient, make_session: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    session = make_session(messages=[user("hi")], context_limit=1000)
    api_client.get(f"/api/sessions/{session.pk}/context")
    with CaptureQueriesContext(connection) as queries:
        body = api_client.get(f"/api/sessions/{session.pk}/context").json()
    assert body["limit"] == 1000
    tables = [q["sql"].split(" FROM ")[1].split()[0] for q in queries]
    assert '"sessions_app_compactionprofile"' not in tables
    assert len(queries) == 2, "the key, then the session with its profile"
