"""Actions on a session: compact now (with a dry-run preview), live job progress, offload, revert.

Each action answers with a small partial for its panel; when the session changed, the
response also fires `session-changed` so the gauge, chart and open tab reload in place.
A refused action (bad settings, a conflict, the summary model down) raises the service
error and `failures.service_errors` answers it with a notice (422, 409 or 503).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from compaction import NOT_NEEDED
from sessions_app.models import CompactionJob, Session
from sessions_app.selectors.entries import entries_with_messages
from sessions_app.selectors.jobs import session_job
from sessions_app.selectors.profiles import profile_exists
from sessions_app.services.background import jobs
from sessions_app.services.compacting.failure_advice import with_advice
from sessions_app.services.compacting.failure_errors import failure_error
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import (
    CompactionOutcome,
    CompactionPreview,
    compact_session,
)
from sessions_app.services.errors import InvalidInput
from sessions_app.viewmodels.blocks import MessageView, build_message_views
from sessions_app.viewmodels.jobs import job_phases, job_view

from .common import owned_compaction, owned_session, session_changed
from .failures import service_errors

__all__ = [
    "CompactForm",
    "compact",
    "compact_preview",
    "job_phases",
    "job_progress",
    "offload",
    "revert",
]

ACTIONS = "sessions/_actions.html"
#: Rows of the preview's list of messages that would be summarized.
PREVIEW_ROWS: Final = 30
#: Longest summary a person may write or edit before applying it.
MAX_SUMMARY: Final = 100_000


class CompactForm(forms.Form):
    """Compact-now parameters: a profile (default: the session's) and extra instructions.

    `summary`, when posted (edit before apply, from the dry-run preview), is a summary the
    person wrote: it replaces the middle instead of a summarizer call. Posted but blank is
    refused, never read as "no summary".
    """

    profile = forms.CharField(max_length=64, required=False)
    instructions = forms.CharField(max_length=4000, required=False, widget=forms.Textarea)
    summary = forms.CharField(max_length=MAX_SUMMARY, required=False, widget=forms.Textarea)

    def clean_summary(self) -> str | None:
        """The stripped summary; None when none was posted; a blank one is an error."""
        summary: str = self.cleaned_data.get("summary") or ""
        if "summary" not in self.data:
            return None
        if not summary.strip():
            raise forms.ValidationError("The summary must not be empty.")
        return summary.strip()


class OffloadForm(forms.Form):
    """Offload parameters: the size from which a tool result goes to a file."""

    min_chars = forms.IntegerField(min_value=1, max_value=10_000_000, required=False)


@dataclass(frozen=True)
class PreviewRow:
    """One context entry that the compaction would fold into its summary."""

    position: int
    kind: str
    seq: int | None
    view: MessageView | None
    tokens: int


def _params(form: CompactForm) -> dict[str, Any]:
    params = {
        "profile": form.cleaned_data["profile"] or None,
        "instructions": form.cleaned_data["instructions"] or None,
    }
    if form.cleaned_data.get("summary") is not None:
        params["summary"] = form.cleaned_data["summary"]
    return params


def _valid_form(request: HttpRequest) -> CompactForm:
    """The posted compaction form; InvalidInput (a 422 notice) when it is not valid."""
    form = CompactForm(request.POST)
    if not form.is_valid():
        field = next(iter(form.errors), "form")
        if field == "summary":
            text = f"The summary must not be empty (at most {MAX_SUMMARY:,} characters)."
            raise InvalidInput.field("summary", text)
        raise InvalidInput.field(field, "Check the compaction settings.")
    return form


def _preview_rows(session: Session, entry_ids: list[Any]) -> list[PreviewRow]:
    entries = entries_with_messages(session, entry_ids[:PREVIEW_ROWS])
    messages = [e.message for e in entries if e.message is not None]
    views = {v.seq: v for v in build_message_views(messages)}
    return [
        PreviewRow(
            position=e.position,
            kind=e.kind,
            seq=e.message.seq if e.message else None,
            view=views.get(e.message.seq) if e.message else None,
            tokens=e.token_count,
        )
        for e in entries
    ]


@login_required
@require_POST
@service_errors
def compact_preview(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Dry run: what would be summarized, the predicted tokens and summary; nothing stored."""
    session = owned_session(request, session_id)
    form = _valid_form(request)
    params = _params(form)
    outcome = compact_session(session, dry_run=True, **params)
    preview = outcome.preview
    ids = list(preview.middle_entry_ids) if preview else []
    context = {
        "session": session,
        "preview": preview,
        "ran_steps": [s for s in preview.steps if s["ran"]] if preview else [],
        # Steps that changed the context besides the summary: a written summary skips them.
        "other_steps": _other_steps(preview),
        "earlier": _earlier_prediction(request, params, preview),
        "rows": _preview_rows(session, ids),
        "hidden_rows": max(0, len(ids) - PREVIEW_ROWS),
        "params": params,
        "outcome": outcome,
        "failure": _preview_failure(session, params, outcome),
        "max_summary": MAX_SUMMARY,
    }
    return render(request, f"{ACTIONS}#preview", context)


def _other_steps(preview: CompactionPreview | None) -> list[str]:
    """The steps of `preview` that changed the context, the summary step excepted."""
    if preview is None:
        return []
    return [
        s["step"] for s in preview.steps if s["ran"] and s["changed"] and s["step"] != "summary"
    ]


def _earlier_prediction(
    request: HttpRequest, params: dict[str, Any], preview: CompactionPreview | None
) -> dict[str, Any] | None:
    """What the preview before this one predicted, when this one re-predicts a summary the
    person wrote or edited: its tokens after and the steps it ran besides the summary.

    Posted back by the preview (`earlier_tokens`, `earlier_steps`) so that the new figure
    can say why it differs: a written summary replaces the middle through the summary step
    alone (services/compacting/session_compaction.py), so pruning or offloading predicted
    with the profile's summarizer does not run."""
    raw = request.POST.get("earlier_tokens", "")
    if "summary" not in params or preview is None or not raw.isdigit() or len(raw) > 12:
        return None
    steps = [s for s in request.POST.get("earlier_steps", "").split(",") if s.isidentifier()]
    tokens = int(raw)
    return {
        "tokens": tokens,
        "steps": [s for s in steps if s != "summary"],
        "differs": tokens != preview.predicted_tokens_after,
    }


def _preview_failure(
    session: Session, params: dict[str, Any], outcome: CompactionOutcome
) -> dict[str, Any] | None:
    """The error of a dry run that could not compact for a failure (not "nothing needed"),
    with the sentence a failed row would have (which summarizer, host, what to do)."""
    reason = outcome.reason
    if not reason or reason in NOT_NEEDED:
        return None
    cause = outcome.result.failure if outcome.result is not None else None
    record = failure_error(reason, {"events": outcome.events}, cause=cause)
    return with_advice(record, session, params.get("profile"))


@login_required
@require_POST
@service_errors
def compact(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Queue a background compaction and answer with its live progress."""
    session = owned_session(request, session_id)
    form = _valid_form(request)
    profile = form.cleaned_data["profile"]
    if profile and not profile_exists(profile):
        raise InvalidInput.field("profile", f"Unknown profile {profile!r}.")
    # At most one active job per session: a second request (a double click, a script)
    # while one is queued or running queues nothing and says so beside that job's progress.
    job, queued = jobs.queue_compaction(session, params={**_params(form), "trigger": "manual"})
    job.refresh_from_db()
    return _job_response(request, session, job, clear_preview=queued, coalesced=not queued)


def _job_response(
    request: HttpRequest,
    session: Session,
    job: CompactionJob,
    *,
    clear_preview: bool = False,
    coalesced: bool = False,
) -> HttpResponse:
    """The job's progress; `clear_preview` also empties the (now stale) dry-run preview;
    `coalesced`: this request queued nothing because the job was already active."""
    context = {
        "session": session,
        "clear_preview": clear_preview,
        "coalesced": coalesced,
        **job_view(job),
    }
    response = render(request, f"{ACTIONS}#job", context)
    return session_changed(response) if context["done"] else response


@login_required
@require_GET
@service_errors
def job_progress(request: HttpRequest, session_id: uuid.UUID, job_id: uuid.UUID) -> HttpResponse:
    """A job's progress; polled every second until it is done (then polling stops)."""
    session = owned_session(request, session_id)
    job = session_job(session, job_id)
    return _job_response(request, session, job)


@login_required
@require_POST
@service_errors
def offload(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Offload large tool results of the runtime context to files."""
    session = owned_session(request, session_id)
    form = OffloadForm(request.POST)
    if not form.is_valid():
        raise InvalidInput.field("min_chars", "The size must be a positive number of characters.")
    result = offload_session(session, min_chars=form.cleaned_data["min_chars"])
    count = result.offloaded_count
    if not count:
        text = "No tool result was large enough to offload."
        return render(request, f"{ACTIONS}#notice", {"level": "info", "text": text})
    text = (
        f"Offloaded {count} tool result{'s' if count != 1 else ''} "
        f"({result.freed_chars:,} characters): "
        f"{result.tokens_before:,} → {result.tokens_after:,} tokens. "
        f"Recorded as #{result.compaction} in the compaction log, where it can be undone."
    )
    response = render(request, f"{ACTIONS}#notice", {"level": "success", "text": text})
    return session_changed(response)


@login_required
@require_POST
@service_errors
def revert(request: HttpRequest, session_id: uuid.UUID, number: int) -> HttpResponse:
    """Undo compaction `number`: its original entries come back into the runtime context."""
    compaction = owned_compaction(request, session_id, number)
    revert_compaction(compaction.session, number)
    if compaction.is_offload:
        text = f"Undid offload #{number}: the offloaded tool results are back in the context."
    else:
        text = f"Reverted compaction #{number}: its original messages are back in the context."
    response = render(request, f"{ACTIONS}#notice", {"level": "success", "text": text})
    return session_changed(response)
