"""Actions: dry-run preview, background compaction with live progress, offload, revert, import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction, CompactionJob, ContextEntry, Session
from sessions_app.services.sessions.lifecycle import create_session
from tests.sessions_app import samples
from tests.support.histories import exchange, system
from tests.support.histories import user as user_message

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

IMMEDIATE_TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
NEW_SUMMARY = "Third summary: the CLI uses the new parser."


@pytest.fixture
def immediate_tasks(settings: Any) -> None:
    """Background jobs run at once, inside the request (django-tasks' ImmediateBackend)."""
    settings.TASKS = IMMEDIATE_TASKS


def test_preview_shows_what_would_be_summarized_and_stores_nothing(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=NEW_SUMMARY)
    session = ui_session.session
    before = (session.context_tokens, Compaction.objects.count(), ContextEntry.objects.count())
    response = logged_in.post(
        reverse("ui:compact_preview", args=[session.pk]),
        {"profile": "", "instructions": "keep the CLI names"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Would be summarized" in html
    assert "earlier summary" in html  # summary #2 is in the middle: multi-level
    assert NEW_SUMMARY in html
    assert 'id="commit-button"' in html
    assert "Tokens" in html
    assert "→" in html
    session.refresh_from_db()
    after = (session.context_tokens, Compaction.objects.count(), ContextEntry.objects.count())
    assert after == before


def test_preview_lists_the_messages_to_summarize(
    logged_in: Client, user: Any, scripted: Any, ui: Any
) -> None:
    scripted(default=NEW_SUMMARY)
    session = create_session(user, messages=ui.rich_messages(), profile=ui.ui_profile())
    html = logged_in.post(reverse("ui:compact_preview", args=[session.pk]), {}).content.decode()
    rows = html[html.index('<ol class="preview-rows">') : html.index("</ol>")]
    assert '<span class="mono muted">#1</span>' in rows
    assert "Please handle task 1" in rows
    assert "earlier summary" not in rows
    assert "&lt;script&gt;" in rows or "#13" not in rows  # hostile text stays text


def test_preview_when_nothing_to_compact(logged_in: Client, user: Any) -> None:
    session = create_session(user, messages=[system(), user_message("hi")])
    response = logged_in.post(reverse("ui:compact_preview", args=[session.pk]), {})
    assert b"Nothing to compact" in response.content


def test_compact_now_runs_the_job_and_refreshes_the_page(
    ui_session: UiSession, logged_in: Client, scripted: Any, immediate_tasks: None
) -> None:
    scripted(default=NEW_SUMMARY)
    session = ui_session.session
    response = logged_in.post(
        reverse("ui:compact", args=[session.pk]), {"profile": "ui-test"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-job-status="succeeded"' in html
    assert 'hx-trigger="every 1s"' not in html  # done: polling stops
    assert response["HX-Trigger-After-Settle"] == '{"session-changed": {}}'
    newest = Compaction.objects.filter(session=session).order_by("-number").first()
    assert newest is not None
    assert newest.number == 3
    assert newest.summary.endswith(NEW_SUMMARY) or NEW_SUMMARY in newest.summary
    assert f"#{newest.number}</a>" in html
    assert newest.parent is None
    assert Compaction.objects.get(pk=ui_session.outer.pk).parent_id == newest.pk
    # The page now shows #3 at the top with #2 nested inside it.
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert 'data-compaction="3"' in page
    assert 'data-compaction="2"' not in page


def test_running_job_polls_every_second_until_done(
    ui_session: UiSession, logged_in: Client
) -> None:
    session = ui_session.session
    job = CompactionJob.objects.create(
        session=session,
        status=CompactionJob.Status.RUNNING,
        phase="summary_start",
        events=[{"phase": "compaction_start"}, {"phase": "summary_start"}],
    )
    url = reverse("ui:job", args=[session.pk, job.pk])
    running = logged_in.get(url, HTTP_HX_REQUEST="true")
    html = running.content.decode()
    assert f'hx-get="{url}" hx-trigger="every 1s" hx-swap="outerHTML"' in html
    assert 'data-phase="summary"' in html
    assert "HX-Trigger-After-Settle" not in running
    assert 'class="phase phase-current" data-phase="commit"' in html
    # The session page shows the running job without anyone asking.
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert f'id="job-{job.pk}"' in page
    assert 'class="phase phase-current" data-phase="commit"' in page
    CompactionJob.objects.filter(pk=job.pk).update(
        status=CompactionJob.Status.FAILED, error="compaction failed: timeout", phase="failed"
    )
    done = logged_in.get(url, HTTP_HX_REQUEST="true")
    assert b"every 1s" not in done.content
    assert b"compaction failed: timeout" in done.content
    assert b"phase-failed" in done.content
    assert done["HX-Trigger-After-Settle"] == '{"session-changed": {}}'


def test_a_job_summarizing_in_parts_shows_the_part(
    ui_session: UiSession, logged_in: Client
) -> None:
    session = ui_session.session
    events = [
        {"phase": "summary_start"},
        *({"phase": "summary_chunk", "detail": {"chunk": n, "chunks": 7}} for n in (1, 2, 3)),
    ]
    job = CompactionJob.objects.create(
        session=session, status=CompactionJob.Status.RUNNING, phase="summary_chunk", events=events
    )

    html = logged_in.get(reverse("ui:job", args=[session.pk, job.pk]), HTTP_HX_REQUEST="true")

    assert "Summarizing (part 3 of 7)" in html.content.decode()


def test_job_of_another_session_is_a_404(
    ui_session: UiSession, logged_in: Client, user: Any
) -> None:
    other = create_session(user, messages=[system()])
    job = CompactionJob.objects.create(session=other)
    url = reverse("ui:job", args=[ui_session.session.pk, job.pk])
    assert logged_in.get(url).status_code == 404


def test_unknown_profile_is_refused(ui_session: UiSession, logged_in: Client) -> None:
    url = reverse("ui:compact", args=[ui_session.session.pk])
    response = logged_in.post(url, {"profile": "no-such-profile"})
    assert b"Unknown profile" in response.content
    assert not CompactionJob.objects.exists()


@pytest.mark.parametrize("name", ["ui:compact", "ui:compact_preview"])
def test_invalid_compaction_settings_are_refused(
    ui_session: UiSession, logged_in: Client, name: str
) -> None:
    url = reverse(name, args=[ui_session.session.pk])
    response = logged_in.post(url, {"instructions": "x" * 4001})
    assert "Check the compaction settings." in response.content.decode()
    assert not CompactionJob.objects.exists()


def test_offload_large_tool_results(logged_in: Client, user: Any) -> None:
    output = "a long tool output line\n" * 30
    session = create_session(
        user, messages=[system(), user_message("go"), *exchange("o1", "Read", {}, output)]
    )
    response = logged_in.post(
        reverse("ui:offload", args=[session.pk]), {"min_chars": "100"}, HTTP_HX_REQUEST="true"
    )
    assert b"Offloaded 1 tool result" in response.content
    assert response["HX-Trigger-After-Settle"] == '{"session-changed": {}}'
    again = logged_in.post(reverse("ui:offload", args=[session.pk]), {"min_chars": "100"})
    assert b"No tool result was large enough" in again.content
    bad = logged_in.post(reverse("ui:offload", args=[session.pk]), {"min_chars": "-3"})
    assert b"positive number" in bad.content


def test_revert_in_order(ui_session: UiSession, logged_in: Client) -> None:
    session = ui_session.session
    inner = reverse("ui:revert", args=[session.pk, ui_session.inner.number])
    blocked = logged_in.post(inner, HTTP_HX_REQUEST="true")
    assert b"notice-error" in blocked.content
    assert f"#{ui_session.outer.number}".encode() in blocked.content
    outer = logged_in.post(reverse("ui:revert", args=[session.pk, ui_session.outer.number]))
    assert b"Reverted compaction #2" in outer.content
    assert outer["HX-Trigger-After-Settle"] == '{"session-changed": {}}'
    assert Compaction.objects.get(pk=ui_session.outer.pk).status == "reverted"
    missing = logged_in.post(reverse("ui:revert", args=[session.pk, 99]))
    assert missing.status_code == 404
    log = logged_in.get(reverse("ui:tab", args=[session.pk, "log"]), HTTP_HX_REQUEST="true")
    assert b'class="badge status status-reverted">reverted' in log.content


def test_posts_need_the_csrf_token(ui_session: UiSession, user: Any) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    url = reverse("ui:revert", args=[ui_session.session.pk, ui_session.outer.number])
    assert strict.post(url).status_code == 403
    page = strict.get(reverse("ui:session", args=[ui_session.session.pk]))
    token = page.cookies["csrftoken"].value
    accepted = strict.post(url, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert accepted.status_code == 200


def test_import_a_transcript_and_see_its_compactions(logged_in: Client, user: Any) -> None:
    sample = samples.samples_dir() / "cclog_dag_compact_after_rewind.synthetic.jsonl"
    with sample.open("rb") as handle:
        response = logged_in.post(
            reverse("ui:import"), {"file": handle, "format": "", "title": "Imported one"}
        )
    assert response.status_code == 302
    session = Session.objects.get(owner=user, title="Imported one")
    assert response["Location"] == reverse("ui:session", args=[session.pk])
    page = logged_in.get(response["Location"]).content.decode()
    assert "Imported" in page
    imported = Compaction.objects.filter(session=session, trigger="imported")
    assert imported.exists()
    for compaction in imported.filter(status="succeeded", parent=None):
        assert f'data-compaction="{compaction.number}"' in page


def test_import_errors_are_shown(logged_in: Client) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = SimpleUploadedFile("notes.txt", b"this is not a transcript")
    response = logged_in.post(reverse("ui:import"), {"file": bad}, follow=True)
    assert b"Could not import notes.txt" in response.content
    empty = logged_in.post(reverse("ui:import"), {}, follow=True)
    assert b"Choose a transcript file" in empty.content
