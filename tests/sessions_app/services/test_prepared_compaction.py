"""Compaction ahead of time (issue 26 item 1, docs/behaviour.md#prepared-compaction).

Past the profile's `prepare_at` a check queues a job of kind "prepare"; the job writes the
compaction and keeps it unapplied; at the threshold a check applies it without calling the
summarizer, with the messages appended since verbatim after it; a change of the entries
since makes it stale. Over the hard limit with nothing ready, the check compacts at once.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

from compaction import ScriptedSummarizer
from sessions_app.models import (
    Compaction,
    CompactionJob,
    CompactionProfile,
    PreparedCompaction,
    Session,
)
from sessions_app.services.background.jobs import PREPARE, enqueue_compaction, run_job
from sessions_app.services.compacting.auto import post_call_check, prepare_context
from sessions_app.services.compacting.prepared import apply_prepared
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.sessions.lifecycle import append_messages

SUMMARY = "Goals and key decisions:\n- prepared ahead of time"


@pytest.fixture
def profile(make_profile: Any) -> CompactionProfile:
    made: CompactionProfile = make_profile(
        keep_recent_messages=4,
        steps=["summary"],
        trigger_ratio=0.9,
        prepare_at=0.5,
        cooldown_seconds=0,
    )
    return made


def _at_share(session: Session, share: float) -> Session:
    """The session with a context limit that puts its context at `share` of it."""
    session.refresh_from_db()
    session.context_limit = int(session.context_tokens / share)
    session.save(update_fields=["context_limit"])
    return Session.objects.get(pk=session.pk)


def _prepared(session: Session) -> PreparedCompaction:
    """Run the queued prepare job as the worker would; its kept compaction."""
    job = CompactionJob.objects.get(session=session, status="queued")
    assert job.params["kind"] == PREPARE
    assert run_job(str(job.pk)).status == "succeeded"
    return PreparedCompaction.objects.get(session=session)


@pytest.mark.django_db
def test_past_prepare_at_a_job_prepares_and_the_threshold_applies_it_without_the_model(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    summarizer: ScriptedSummarizer = scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    payload = prepare_context(session)
    assert payload.compaction is None
    assert payload.skipped == "below_threshold"
    assert not summarizer.requests  # nothing ran in the check
    prepared = _prepared(session)
    calls = len(summarizer.requests)  # the summary (and the retention check's re-ask)
    assert calls >= 1
    assert not Compaction.objects.filter(session=session).exists()  # kept, not applied
    appended = [
        {"role": "user", "content": "a question asked after it was prepared"},
        {"role": "assistant", "content": "an answer after it was prepared"},
    ]
    append_messages(session, appended)
    session = _at_share(session, 0.95)
    payload = prepare_context(session)
    assert len(summarizer.requests) == calls  # applied: no model call in the check
    assert payload.compaction is not None
    assert (payload.compaction.trigger, payload.compaction.status) == ("auto", "succeeded")
    row = Compaction.objects.get(session=session)
    assert row.prepared_at == prepared.prepared_at
    assert row.created_at >= row.prepared_at
    assert row.details["prepared"]["entries_appended_since"] == 2
    assert SUMMARY in row.summary
    assert not PreparedCompaction.objects.filter(session=session).exists()
    context = runtime_messages(session)
    assert [m["content"] for m in context[-2:]] == [m["content"] for m in appended]
    assert any(SUMMARY in str(m["content"]) for m in context)
    session.refresh_from_db()
    assert session.compaction_count == 1


@pytest.mark.django_db
def test_a_revert_since_makes_the_prepared_compaction_stale(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    prepare_context(session)
    _prepared(session)
    manual = compact_session(session, trigger="manual", profile=profile)
    assert manual.compaction is not None
    revert_compaction(session, manual.compaction.number)  # entries changed twice since
    session = _at_share(session, 0.95)
    payload = prepare_context(session)
    assert payload.compaction is None
    assert payload.skipped == "preparing"  # under the hard limit: the call goes on
    assert not PreparedCompaction.objects.filter(session=session).exists()  # discarded
    assert Compaction.objects.filter(session=session, status="succeeded").count() == 0
    job = CompactionJob.objects.get(session=session, status="queued")  # prepared again
    assert job.params["kind"] == PREPARE


@pytest.mark.django_db
def test_over_the_hard_limit_with_nothing_ready_the_check_compacts_at_once(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    summarizer = scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 1.05)
    payload = prepare_context(session)
    assert payload.compaction is not None
    assert payload.compaction.status == "succeeded"
    assert summarizer.requests
    row = Compaction.objects.get(session=session, status="succeeded")
    assert row.prepared_at is None


@pytest.mark.django_db
def test_one_prepare_job_at_a_time_and_none_while_one_is_ready(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    prepare_context(session)
    prepare_context(session)
    assert CompactionJob.objects.filter(session=session).count() == 1
    _prepared(session)
    prepare_context(session)  # one is ready for these entries: nothing queued
    assert CompactionJob.objects.filter(session=session).count() == 1


@pytest.mark.django_db
def test_the_post_call_check_prepares_past_prepare_at_and_applies_at_the_threshold(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    limit = session.context_limit or 0
    reply = {"role": "assistant", "content": "ok", "usage": {"input_tokens": int(limit * 0.6)}}
    job = post_call_check(session, [reply])
    assert job is not None
    assert job.params["kind"] == PREPARE
    _prepared(session)
    over = {**reply, "usage": {"input_tokens": int(limit * 0.95)}}
    assert post_call_check(session, [over]) is None  # applied, nothing queued
    row = Compaction.objects.get(session=session)
    assert row.prepared_at is not None


@pytest.mark.django_db
def test_a_profile_without_prepare_at_compacts_in_the_request(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    summarizer = scripted(default=SUMMARY)
    profile.prepare_at = None
    profile.save(update_fields=["prepare_at"])
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    assert prepare_context(session).skipped == "below_threshold"
    assert not CompactionJob.objects.filter(session=session).exists()
    session = _at_share(session, 0.95)
    assert not summarizer.requests
    assert prepare_context(session).compaction is not None
    assert summarizer.requests


@pytest.mark.django_db(transaction=True)
def test_no_connection_but_sqlites_is_held_while_the_summarizer_answers(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    held: list[list[str]] = []

    def answer(request: Any) -> str:
        held.append(
            [
                c.alias
                for c in connections.all(initialized_only=True)
                if c.connection is not None and c.vendor != "sqlite"
            ]
        )
        return SUMMARY

    scripted(default=answer)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    prepare_context(session)
    _prepared(session)
    assert held
    assert all(aliases == [] for aliases in held)


@pytest.mark.django_db
def test_the_compaction_log_says_when_it_was_prepared_and_when_applied(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any, user: Any
) -> None:
    scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    prepare_context(session)
    prepared = _prepared(session)
    prepare_context(_at_share(session, 0.95))
    client = Client()
    client.force_login(user)
    url = reverse("ui:tab", args=[session.pk, "log"])
    html = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "data-prepared-at" in html
    assert "Prepared ahead" in html
    assert prepared.prepared_at.strftime("%H:%M:%S") in html
    row = Compaction.objects.get(session=session)
    assert row.created_at.strftime("%Y-%m-%d %H:%M:%S") in html


@pytest.mark.django_db
def test_the_prepare_endpoint_goes_on_while_the_compaction_is_prepared(
    api_client: Any, make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    summarizer = scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.95)
    body = api_client.post(f"/api/sessions/{session.pk}/context/prepare").json()
    assert body["compaction"] is None
    assert body["skipped"] == "preparing"
    assert body["tokens"] >= session.context_tokens
    assert not summarizer.requests
    _prepared(session)
    body = api_client.post(f"/api/sessions/{session.pk}/context/prepare").json()
    assert body["compaction"]["trigger"] == "auto"
    assert body["skipped"] is None
    assert body["tokens"] < session.context_tokens


@pytest.mark.django_db
def test_a_prepared_compaction_applies_once(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    prepare_context(session)
    _prepared(session)
    assert apply_prepared(session) is not None
    assert apply_prepared(session) is None
    assert Compaction.objects.filter(session=session).count() == 1


@pytest.mark.django_db
def test_a_change_during_the_preparation_keeps_nothing(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)

    def meanwhile(request: Any) -> str:
        # Someone compacts the same entries (a summary of their own) while the model writes.
        compact_session(Session.objects.get(pk=session.pk), summary="Theirs.", trigger="manual")
        return SUMMARY

    scripted(meanwhile, default=SUMMARY)
    prepare_context(session)
    job = CompactionJob.objects.get(session=session)
    run = run_job(str(job.pk))
    assert run.status == "succeeded"
    job.refresh_from_db()
    assert job.events[-1]["reason"] == "context_changed"
    assert not PreparedCompaction.objects.filter(session=session).exists()
    assert Compaction.objects.filter(session=session).count() == 1  # theirs only


@pytest.mark.django_db
def test_compact_now_takes_over_a_queued_prepare_job(
    make_session: Any, profile: CompactionProfile, conversation: Any, scripted: Any
) -> None:
    scripted(default=SUMMARY)
    session = _at_share(make_session(messages=conversation(8), profile=profile), 0.6)
    prepare_context(session)
    prepare = CompactionJob.objects.get(session=session)
    job = enqueue_compaction(session, params={"trigger": "manual"})
    assert job.pk == prepare.pk
    job.refresh_from_db()
    assert job.params == {"trigger": "manual"}
    assert run_job(str(job.pk)).compaction == 1  # compacted, not prepared
    assert not PreparedCompaction.objects.filter(session=session).exists()
