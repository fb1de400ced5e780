"""`/api/sessions/{id}/compactions`: compact now (sync, dry run, summary, background), list,
detail with originals, revert."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.carried_state import STATE_CLOSE, STATE_OPEN
from sessions_app.models import Compaction, CompactionJob, Session
from sessions_app.services.background.jobs import run_job
from sessions_app.services.sessions.lifecycle import append_messages
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, user

pytestmark = pytest.mark.django_db

F008 = (
    "original_token_count",
    "compacted_token_count",
    "compaction_ratio",
    "compacted_message_count",
    "retained_message_count",
)


@pytest.fixture
def session(make_session: Any, make_profile: Any, conversation: Any) -> Session:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    made: Session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    return made


def narrative_and_block(summary: str) -> tuple[str, str]:
    """A summary split into the summarizer's text and the `<session-state>` block the engine
    ends it with (docs/behaviour.md#what-a-summary-always-keeps)."""
    narrative, separator, rest = summary.partition(f"\n\n{STATE_OPEN}\n")
    assert separator, f"no state block in {summary!r}"
    block = f"{STATE_OPEN}\n{rest}"
    assert block.endswith(f"\n{STATE_CLOSE}"), block
    assert block.count(STATE_OPEN) == block.count(STATE_CLOSE) == 1, block
    return narrative, block


def url(session: Session, tail: str = "") -> str:
    return f"/api/sessions/{session.pk}/compactions{tail}"


def test_compact_now_returns_201_with_the_compaction(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    summarizer = scripted(default="Goals and key decisions:\n- summary")
    response = api_client.post(url(session), {"instructions": "keep file names"})
    assert response.status_code == 201
    body = response.json()
    assert body["compacted"] is True
    assert body["number"] == 1
    assert body["parent"] is None
    assert body["status"] == "succeeded"
    assert body["trigger"] == "api"
    assert body["created_at"]
    compaction = body["compaction"]
    for name in F008:
        assert name in compaction
    assert compaction["summarizer"] == "scripted"
    narrative, block = narrative_and_block(compaction["summary"])
    assert narrative == "Goals and key decisions:\n- summary"
    assert block == summarizer.requests[0].state_block
    assert compaction["instructions"] == "keep file names"
    assert compaction["first_seq"] == 1
    assert compaction["duration_ms"] >= 0


def test_dry_run_previews_and_stores_nothing(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    summarizer = scripted(default="would be used")
    body = api_client.post(url(session), {"dry_run": True}).json()
    assert body["dry_run"] is True
    assert body["number"] is None
    preview = body["preview"]
    assert set(preview["partition"]) == {"head", "middle", "tail"}
    assert preview["partition"]["middle"]["messages"] > 0
    assert preview["partition"]["middle"]["tokens"] > 0
    narrative, block = narrative_and_block(preview["summary"])
    assert narrative == "would be used"
    assert block == summarizer.requests[0].state_block
    assert preview["predicted_tokens_after"] < preview["tokens_before"]
    assert not Compaction.objects.exists()


def test_a_caller_written_summary(api_client: JsonClient, session: Session) -> None:
    body = api_client.post(url(session), {"summary": "I did X and Y."}).json()
    assert body["compaction"]["summarizer"] == "caller"
    assert body["compaction"]["summary"] == "I did X and Y."


def test_an_empty_caller_summary_is_422(api_client: JsonClient, session: Session) -> None:
    response = api_client.post(url(session), {"summary": "   "})
    assert response.status_code == 422
    assert not Compaction.objects.exists()


def test_a_failed_compaction_is_200_with_status_failed(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    from compaction import SummaryError

    scripted(default=SummaryError("empty_summary", retryable=False))
    before = api_client.get(f"/api/sessions/{session.pk}/context").json()
    response = api_client.post(url(session), {})
    assert response.status_code == 200
    body = response.json()
    assert body["compacted"] is False
    assert body["status"] == "failed"
    assert body["compaction"]["failure_reason"] == "empty_summary"
    assert api_client.get(f"/api/sessions/{session.pk}/context").json() == before


def test_background_returns_202_and_the_job_runs(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    scripted(default="background summary")
    response = api_client.post(url(session), {"background": True, "profile": "test"})
    assert response.status_code == 202
    job_id = response.json()["job_id"]
    assert response.json()["url"] == f"/api/jobs/{job_id}"
    job = api_client.get(f"/api/jobs/{job_id}").json()
    assert job["status"] == "queued"
    assert job["compaction"] is None
    run_job(job_id)
    job = api_client.get(f"/api/jobs/{job_id}").json()
    assert job["status"] == "succeeded"
    assert job["compaction"] == 1
    phases = [event["phase"] for event in job["events"]]
    assert "summary_start" in phases
    assert phases[-1] == "done"
    assert job["error"] == ""
    assert job["attempts"] == 1
    assert CompactionJob.objects.get(pk=job_id).params["profile"] == "test"


def compact_twice(api_client: JsonClient, session: Session, scripted: Any) -> None:
    """Compaction #1, more messages, then #2, which re-summarizes #1 (nested markers)."""
    scripted(default="one")
    api_client.post(url(session), {})
    append_messages(
        session,
        [m for i in range(6) for m in (user(f"more {i} " * 40), assistant(f"ok {i} " * 40))],
    )
    api_client.post(url(session), {})


def test_list_and_detail_with_archived_originals(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    compact_twice(api_client, session, scripted)
    listing = api_client.get(url(session)).json()
    assert [item["number"] for item in listing["items"]] == [1, 2]
    assert listing["items"][0]["parent"] == 2
    assert listing["items"][1]["children"] == [1]
    page = api_client.get(url(session, "?limit=1")).json()
    assert len(page["items"]) == 1
    assert page["next"]
    rest = api_client.get(url(session, f"?limit=1&cursor={page['next']}")).json()
    assert [item["number"] for item in rest["items"]] == [2]
    assert rest["next"] is None
    detail = api_client.get(url(session, "/1")).json()
    originals = detail["originals"]
    assert [o["seq"] for o in originals] == list(range(detail["first_seq"], detail["last_seq"] + 1))
    assert all("message" in o and "id" in o for o in originals)
    assert api_client.get(url(session, "/7")).status_code == 404


def test_revert_and_the_409_naming_which_to_revert_first(
    api_client: JsonClient, session: Session, scripted: Any
) -> None:
    compact_twice(api_client, session, scripted)
    blocked = api_client.post(url(session, "/1/revert"))
    assert blocked.status_code == 409
    assert "#2" in blocked.json()["detail"]
    assert blocked.json()["revert_first"] == 2
    reverted = api_client.post(url(session, "/2/revert"))
    assert reverted.status_code == 200
    assert reverted.json()["status"] == "reverted"
    assert api_client.post(url(session, "/1/revert")).status_code == 200
    assert api_client.post(url(session, "/1/revert")).status_code == 409
    assert api_client.post(url(session, "/9/revert")).status_code == 404


def test_bad_compaction_input_is_422(api_client: JsonClient, session: Session) -> None:
    response = api_client.post(url(session), {"dry_run": "maybe"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["path"] == "dry_run"
    response = api_client.post(url(session), {"profile": "ghost"})
    assert response.status_code == 422
    assert not Compaction.objects.exists()
