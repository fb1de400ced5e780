"""Importing a transcript file from the sessions list (through the importers' `import_file`).

A file that cannot be imported (`InvalidInput` naming the file or its format) is form
feedback: the list page again with a message naming the file, like an empty form. Any other
service error (storage unavailable...) is answered by `failures.service_errors`.
"""

from __future__ import annotations

import logging

from django import forms
from django.contrib import messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from sessions_app.importers import import_formats
from sessions_app.services.errors import InvalidInput
from sessions_app.services.importing import import_file

from .failures import service_errors

__all__ = ["ImportForm", "format_choices", "import_transcript"]

logger = logging.getLogger("sessions_app")


def format_choices() -> list[tuple[str, str]]:
    """The upload form's format choices: detection, then every registered import format."""
    return [("", "Detect automatically"), *((f.name, f.file_label) for f in import_formats())]


class ImportForm(forms.Form):
    """A transcript file, its format (detected when empty) and an optional title."""

    file = forms.FileField()
    format = forms.ChoiceField(choices=format_choices, required=False)
    title = forms.CharField(max_length=300, required=False)


@login_required
@require_POST
@service_errors
def import_transcript(request: HttpRequest) -> HttpResponse:
    """Import the uploaded file as a session of the user (the one it made before, updated,
    when the same transcript was imported already), then open it."""
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose a transcript file to import.")
        return _back(request, reverse("ui:session_list"))
    upload = form.cleaned_data["file"]
    owner = request.user
    if not isinstance(owner, AbstractBaseUser):  # login_required makes this unreachable
        return redirect("login")
    try:
        report = import_file(
            owner,
            upload,
            format=form.cleaned_data["format"] or None,
            title=form.cleaned_data["title"] or None,
            name=upload.name or "",
        )
    except InvalidInput as error:
        messages.error(request, f"Could not import {upload.name}: {_said_once(error, upload.name)}")
        return _back(request, reverse("ui:session_list"))
    counts = report.counts
    done = "Imported" if report.created else f"Updated ({report.new_messages} new messages) from"
    messages.success(
        request,
        f"{done} {upload.name} ({report.source_format}): {counts.get('messages', 0)} messages, "
        f"{counts.get('compactions', 0)} compactions"
        + (f", {report.skipped_count} lines skipped." if report.skipped_count else "."),
    )
    return _back(request, reverse("ui:session", args=[report.session.pk]))


def _said_once(error: InvalidInput, name: str | None) -> str:
    """The problem's message without the file name the notice already starts with (the
    readers name their input: "bad.jsonl: not valid UTF-8 (byte 0)")."""
    message = error.first.message
    prefix = f"{name}: " if name else ""
    return message[len(prefix) :] if prefix and message.startswith(prefix) else message


def _back(request: HttpRequest, url: str) -> HttpResponse:
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(url)
    return redirect(url)
