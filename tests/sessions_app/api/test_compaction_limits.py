"""The compaction objects of the API carry the limits in force when each ran (added keys),
and an offload answers the number of its record in the compaction log."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import Session
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, exchange, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"], trigger_ratio=0.5)
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def test_compactions_carry_the_limits_in_force(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    scripted(default="Goals:\n- summary")
    created = api_client.post(f"/api/sessions/{session.pk}/compactions", {})
    assert created.status_code == 201
    compaction = created.json()["compaction"]
    assert compaction["context_limit"] == 3000
    assert compaction["threshold_tokens"] == 1500
    assert compaction["hard_limit"] == 3000
    listed = api_client.get(f"/api/sessions/{session.pk}/compactions").json()["items"][0]
    assert listed["threshold_tokens"] == 1500
    detail = api_client.get(f"/api/sessions/{session.pk}/compactions/1").json()
    assert detail["hard_limit"] == 3000


def test_an_offload_answers_its_record_and_is_listed(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(
        messages=[user("go"), *exchange("t1", result="x" * 500), assistant("ok")]
    )
    body = api_client.post(f"/api/sessions/{session.pk}/offload", {"min_chars": 100}).json()
    assert body["files"] == ["tool-result-t1.md"]
    assert body["compaction"] == 1
    listed = api_client.get(f"/api/sessions/{session.pk}/compactions").json()["items"]
    assert [(c["number"], c["strategy"], c["trigger"]) for c in listed] == [(1, "offload", "api")]
    again = api_client.post(f"/api/sessions/{session.pk}/offload", {"min_chars": 100}).json()
    assert again["compaction"] is None
