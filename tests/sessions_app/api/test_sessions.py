"""`/api/sessions`: list, create, read, delete, append, history."""

from __future__ import annotations

from typing import Any

import pytest

from compaction import ScriptedSummarizer
from sessions_app.models import CompactionJob, Message, Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import append_messages
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, tool_call, tool_results, user

pytestmark = pytest.mark.django_db


def test_create_returns_201_with_the_id_and_stats(
    api_client: JsonClient, conversation: Any
) -> None:
    messages = conversation(2)[1:]
    response = api_client.post(
        "/api/sessions",
        {
            "title": "demo",
            "system": "Be careful.",
            "messages": messages,
            "context_limit": 5000,
            "profile": "selective",
            "metadata": {"agent": "test"},
        },
    )
    assert response.status_code == 201
    body = response.json()
    session = Session.objects.get(pk=body["id"])
    assert body["title"] == "demo"
    assert body["profile"] == "selective"
    assert body["context_limit"] == 5000
    assert body["threshold"] == int(5000 * 0.92)
    assert body["message_count"] == len(messages) + 1 == session.message_count
    assert body["context_tokens"] == session.context_tokens > 0
    assert body["usage"] == pytest.approx(session.context_tokens / 5000, abs=1e-5)
    assert body["metadata"] == {"agent": "test"}


def test_create_with_no_messages(api_client: JsonClient) -> None:
    response = api_client.post("/api/sessions", {})
    assert response.status_code == 201
    assert response.json()["message_count"] == 0


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
            "messages[0].content[0].tool_use_id",
        ),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"messages": ["not an object"]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": ""}]}, "messages[0].content"),
        ({"profile": "no-such-profile"}, "profile"),
        ({"context_limit": 0}, "context_limit"),
        ({"title": 5}, "title"),
        ({"messages": "nope"}, "messages"),
    ],
)
def test_create_rejects_bad_input_with_the_path(
    api_client: JsonClient, body: dict[str, Any], path: str
) -> None:
    response = api_client.post("/api/sessions", body)
    assert response.status_code == 422
    paths = [item["path"] for item in response.json()["detail"]]
    assert path in paths
    assert not Session.objects.exists()


def test_list_is_paginated_with_an_opaque_cursor(api_client: JsonClient, user: Any) -> None:
    from sessions_app.services.sessions.lifecycle import create_session

    created = [create_session(user, title=f"s{i}") for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        url = "/api/sessions?limit=2" + (f"&cursor={cursor}" if cursor else "")
        body = api_client.get(url).json()
        seen.extend(item["id"] for item in body["items"])
        cursor = body["next"]
        if not cursor:
            break
    assert sorted(seen) == sorted(str(s.pk) for s in created)
    assert len(seen) == len(set(seen))


def test_list_searches_titles(api_client: JsonClient, user: Any) -> None:
    from sessions_app.services.sessions.lifecycle import create_session

    create_session(user, title="parser bug")
    create_session(user, title="deploy")
    body = api_client.get("/api/sessions?search=parser").json()
    assert [item["title"] for item in body["items"]] == ["parser bug"]


def test_a_bad_cursor_is_422(api_client: JsonClient) -> None:
    response = api_client.get("/api/sessions?cursor=%%%garbage")
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "cursor"


def test_read_and_delete(api_client: JsonClient, make_session: Any) -> None:
    session = make_session()
    body = api_client.get(f"/api/sessions/{session.pk}").json()
    assert body["id"] == str(session.pk)
    assert body["history_tokens"] == session.history_tokens
    assert api_client.delete(f"/api/sessions/{session.pk}").status_code == 204
    assert not Session.objects.exists()
    assert api_client.get(f"/api/sessions/{session.pk}").status_code == 404


def test_a_malformed_session_id_is_404(api_client: JsonClient) -> None:
    assert api_client.get("/api/sessions/not-a-uuid").status_code == 404
    assert api_client.get("/api/sessions/..%2F..%2Fetc").status_code == 404


def test_append_returns_seqs_counts_and_version(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(messages=[user("read it"), tool_call("t1")])
    response = api_client.post(
        f"/api/sessions/{session.pk}/messages",
        {"messages": [tool_results(("t1", "the file")), assistant("done")], "expected_version": 1},
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["appended"], body["first_seq"], body["last_seq"]) == (2, 2, 3)
    assert body["version"] == 2
    assert body["message_count"] == 4
    assert len(body["token_counts"]) == 2
    assert all(n > 0 for n in body["token_counts"])
    assert body["job_id"] is None


def test_append_with_a_stale_version_is_409(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(messages=[user("hi")])
    response = api_client.post(
        f"/api/sessions/{session.pk}/messages",
        {"messages": [assistant("x")], "expected_version": 0},
    )
    assert response.status_code == 409
    assert Message.objects.filter(session=session).count() == 1


def test_append_of_an_orphan_tool_result_is_422_and_stores_nothing(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(messages=[user("hi"), assistant("hello")])
    response = api_client.post(
        f"/api/sessions/{session.pk}/messages",
        {"messages": [user("ok"), tool_results(("ghost", "x"))]},
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "messages[1]"
    assert Message.objects.filter(session=session).count() == 2


def test_append_needs_at_least_one_message(api_client: JsonClient, make_session: Any) -> None:
    session = make_session(messages=[user("hi")])
    response = api_client.post(f"/api/sessions/{session.pk}/messages", {"messages": []})
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "messages"


def test_an_assistant_reply_with_usage_over_the_threshold_queues_a_compaction(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(messages=[user("hi")], context_limit=10_000)
    reply = assistant("answer", usage={"input_tokens": 9500, "output_tokens": 100})
    response = api_client.post(f"/api/sessions/{session.pk}/messages", {"messages": [reply]})
    assert response.status_code == 201
    job_id = response.json()["job_id"]
    job = CompactionJob.objects.get(pk=job_id)
    assert job.params["trigger"] == "auto"
    assert job.status == "queued"
    session.refresh_from_db()
    assert session.last_usage["total_tokens"] == 9600


def test_usage_under_the_threshold_queues_nothing(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(messages=[user("hi")], context_limit=10_000)
    reply = assistant("answer", usage={"input_tokens": 100, "output_tokens": 10})
    body = api_client.post(f"/api/sessions/{session.pk}/messages", {"messages": [reply]}).json()
    assert body["job_id"] is None
    assert not CompactionJob.objects.exists()


def test_history_pages_messages_and_nests_markers(
    api_client: JsonClient, make_session: Any, make_profile: Any, conversation: Any
) -> None:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    session = make_session(messages=conversation(8), context_limit=3000, profile=profile)
    first = compact_session(session, summarizer=ScriptedSummarizer(default="one")).compaction
    append_messages(
        session,
        [m for i in range(6) for m in (user(f"more {i} " * 40), assistant(f"ok {i} " * 40))],
    )
    second = compact_session(session, summarizer=ScriptedSummarizer(default="two")).compaction
    assert first is not None
    assert second is not None
    messages: list[dict[str, Any]] = []
    markers: dict[int, dict[str, Any]] = {}
    cursor = None
    while True:
        url = f"/api/sessions/{session.pk}/history?limit=30" + (
            f"&cursor={cursor}" if cursor else ""
        )
        body = api_client.get(url).json()
        messages.extend(body["messages"])
        for marker in body["compactions"]:
            markers[marker["number"]] = marker
        cursor = body["next"]
        if not cursor:
            break
    assert [m["seq"] for m in messages] == list(range(session.message_count))
    assert {"seq", "role", "content", "created_at", "token_count"} <= set(messages[0])
    outer = markers[second.number]
    assert [child["number"] for child in outer["children"]] == [first.number]
    assert outer["first_seq"] <= first.first_seq
    assert outer["last_seq"] >= first.last_seq
    in_context = [m["seq"] for m in messages if m["in_context"]]
    assert 0 in in_context
    assert second.first_seq not in in_context


def test_list_search_is_the_pages_rule(api_client: JsonClient, user: Any) -> None:
    from django.test import Client

    from sessions_app.services.sessions.lifecycle import create_session

    browser = Client()
    browser.force_login(user)

    create_session(user, title="parser bug", model="claude-x")
    create_session(user, title="parser docs", model="gpt-y")
    body = api_client.get("/api/sessions?search=Parser%20claude").json()
    assert [item["title"] for item in body["items"]] == ["parser bug"]
    page = browser.get("/?q=Parser%20claude").content.decode()
    assert "parser bug" in page
    assert "parser docs" not in page
