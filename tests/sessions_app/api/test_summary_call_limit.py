"""The summary requests one API compaction may make (issue 30 item 5,
docs/behaviour.md#summary-call-limit): the profile's `max_summary_calls` holds, and no
per-request `policy` override can make a compaction dearer than its profile."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sessions_app.conftest import JsonClient, conversation_messages

pytestmark = pytest.mark.django_db

#: About 1 MB of conversation: thousands of parts at an input limit of 2,000 tokens.
BIG = conversation_messages(400, words=300)


def test_a_big_body_asking_for_small_requests_is_422_before_any_call(
    api_client: JsonClient, scripted: Any
) -> None:
    summarizer = scripted(default="Goals:\n- never asked")
    response = api_client.post(
        "/api/compact", {"messages": BIG, "policy": {"summary_input_limit": 2000}}
    )
    assert response.status_code == 422, response.content
    detail = response.json()["detail"][0]
    assert detail["path"] == "policy.summary_input_limit"
    assert "100000" in detail["message"]
    assert summarizer.requests == []


def test_a_higher_call_bound_is_422_naming_it(api_client: JsonClient, scripted: Any) -> None:
    scripted(default="Goals:\n- never asked")
    response = api_client.post(
        "/api/compact",
        {"messages": conversation_messages(6), "policy": {"max_summary_calls": 33}},
    )
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["path"] == "policy.max_summary_calls"


def test_overrides_that_make_it_cheaper_are_accepted(
    api_client: JsonClient, make_profile: Any, scripted: Any
) -> None:
    scripted(default="Goals and key decisions:\n- cheaper")
    make_profile("small-parts", summary_input_limit=4000, steps=["summary"])
    response = api_client.post(
        "/api/compact",
        {
            "messages": conversation_messages(12),
            "profile": "small-parts",
            "policy": {
                "context_limit": 3000,
                "keep_recent_messages": 4,
                "summary_input_limit": 8000,
                "max_summary_calls": 3,
            },
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["compacted"] is True


def test_the_profiles_bound_holds_for_a_big_middle(
    api_client: JsonClient, make_profile: Any, scripted: Any
) -> None:
    summarizer = scripted(default="Goals:\n- never asked")
    make_profile(
        "small-parts",
        summary_input_limit=2000,
        max_summary_calls=5,
        steps=["summary"],
        keep_recent_messages=4,
    )
    response = api_client.post("/api/compact", {"messages": BIG, "profile": "small-parts"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["compacted"] is False
    assert body["reason"] == "too_many_summary_calls"
    assert summarizer.requests == []
