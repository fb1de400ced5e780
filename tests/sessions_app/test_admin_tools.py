"""The profile form's file view tools: one name per line (or commas), stored as a JSON list."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.forms.models import model_to_dict
from django.test import Client

from compaction import Policy
from sessions_app.admin_forms import RATIO_FIELDS, CompactionProfileForm, percent_text
from sessions_app.models import CompactionProfile

pytestmark = pytest.mark.django_db

PROFILES = "/admin/sessions_app/compactionprofile/"


def posted(profile: CompactionProfile, tools: str) -> dict[str, Any]:
    data = model_to_dict(profile)
    data.pop("id", None)
    for name in RATIO_FIELDS:
        data[name] = percent_text(data[name])
    data["file_view_tools"] = tools
    return {k: "" if v is None else v for k, v in data.items() if v is not False}


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("Read\nview\n", ["Read", "view"]),
        ("Read, mcp__fs__read_file,\n\nRead", ["Read", "mcp__fs__read_file"]),
        ('["Read", "view"]', ["Read", "view"]),  # the JSON list of before
        ("", []),
    ],
)
def test_tool_names_are_stored_as_a_json_list(typed: str, stored: list[str]) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    form = CompactionProfileForm(posted(profile, typed), instance=profile)
    assert form.is_valid(), form.errors
    form.save()
    profile.refresh_from_db()
    assert profile.file_view_tools == stored


@pytest.mark.parametrize("typed", ["read file", '["Read", 3]', "[not json", "x" * 129])
def test_bad_tool_names_are_refused_on_the_field(typed: str) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    form = CompactionProfileForm(posted(profile, typed), instance=profile)
    assert not form.is_valid()
    assert "file_view_tools" in form.errors
    assert "tool name" in str(form.errors["file_view_tools"])


def test_the_form_shows_one_name_per_line_and_the_engine_list_as_placeholder() -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    profile.file_view_tools = ["Read", "view"]
    html = str(CompactionProfileForm(instance=profile)["file_view_tools"])
    assert "<textarea" in html
    assert ">\nRead\nview</textarea>" in html
    assert "\n".join(Policy().file_view_tools) in html  # the placeholder


def test_the_admin_page_saves_them(db: Any) -> None:
    admin = get_user_model().objects.create_superuser("root", "", "root-password-123")
    client = Client()
    client.force_login(admin)
    profile = CompactionProfile.objects.get(name="balanced")
    url = f"{PROFILES}{profile.pk}/change/"
    page = client.get(url).content.decode()
    assert "one per line" in page
    response = client.post(url, posted(profile, "Read\nview"))
    assert response.status_code == 302
    profile.refresh_from_db()
    assert profile.file_view_tools == ["Read", "view"]
