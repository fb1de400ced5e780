"""`POST /api/compact`: stateless compaction, nothing stored."""

from __future__ import annotations

from typing import Any

import pytest

from compaction import is_summary_message, validate_messages
from sessions_app.models import Compaction, Message, Session
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db


def test_compacts_and_stores_nothing(
    api_client: JsonClient, conversation: Any, scripted: Any
) -> None:
    scripted(default="Goals and key decisions:\n- stateless")
    messages = conversation(12)
    response = api_client.post(
        "/api/compact",
        {
            "system": messages[0]["content"],
            "messages": messages[1:],
            "profile": "context-compact",
            "policy": {"context_limit": 3000, "keep_recent_messages": 4},
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["compacted"] is True
    assert body["summarizer"] == "scripted"
    assert body["system"] == messages[0]["content"]
    assert any(is_summary_message(m) for m in body["messages"])
    assert validate_messages(body["messages"]) == []
    stats = body["stats"]
    assert stats["original_token_count"] == body["tokens_before"]
    assert stats["compacted_token_count"] == body["tokens_after"] < body["tokens_before"]
    assert {"compaction_ratio", "compacted_message_count", "retained_message_count"} <= set(stats)
    assert not Session.objects.exists()
    assert not Message.objects.exists()
    assert not Compaction.objects.exists()


def test_invalid_messages_are_422_with_paths(api_client: JsonClient) -> None:
    response = api_client.post(
        "/api/compact",
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "messages[0].content[0].tool_use_id"


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        ({"trigger_ratio": 1.5}, "policy.trigger_ratio"),
        ({"no_such_field": 1}, "policy.no_such_field"),
        ({"context_limit": "big"}, "policy.context_limit"),  # the engine names the field
    ],
)
def test_bad_policy_overrides_are_422_naming_the_field(
    api_client: JsonClient, policy: dict[str, Any], path: str
) -> None:
    response = api_client.post(
        "/api/compact", {"messages": [{"role": "user", "content": "hi"}], "policy": policy}
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == path


def test_nothing_to_compact(api_client: JsonClient) -> None:
    body = api_client.post("/api/compact", {"messages": [{"role": "user", "content": "hi"}]}).json()
    assert body["compacted"] is False
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_reserved_tokens_count_the_callers_system_prompt_and_tools(
    api_client: JsonClient, conversation: Any, scripted: Any
) -> None:
    # Under the threshold alone; over it with 1,000 tokens of tools the caller sends beside.
    scripted(default="Goals and key decisions:\n- stateless")
    messages = conversation(6)[1:]
    policy = {"context_limit": 4000, "trigger_ratio": 0.5, "keep_recent_messages": 2}
    unforced = {"messages": messages, "force": False}  # the call forces by default
    alone = api_client.post("/api/compact", {**unforced, "policy": policy}).json()
    assert alone["reason"] == "below_threshold"

    body = api_client.post(
        "/api/compact", {**unforced, "policy": {**policy, "reserved_tokens": 1000}}
    ).json()

    assert body["compacted"] is True
    assert body["tokens_after"] < alone["tokens_before"]
    refused = api_client.post(
        "/api/compact", {"messages": messages, "policy": {"reserved_tokens": -5}}
    )
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["path"] == "policy.reserved_tokens"
