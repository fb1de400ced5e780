"""The admin: validated profiles (read fresh by the next compaction), read-only compactions
with escaped archives, API keys shown once and revocable."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.forms.models import model_to_dict
from django.test import Client

from compaction import STEPS, Policy, ScriptedSummarizer
from compaction.carried_state import STATE_CLOSE, STATE_OPEN
from sessions_app.admin_forms import RATIO_FIELDS, CompactionProfileForm, percent_text
from sessions_app.models import ApiKey, Compaction, CompactionProfile, SummarizerConfig
from sessions_app.services.compacting.auto import prepare_context
from sessions_app.services.compacting.session_compaction import compact_session
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: Any) -> Client:
    admin = get_user_model().objects.create_superuser("root", "", "root-password-123")
    client = Client()
    client.force_login(admin)
    return client


def form_data(profile: CompactionProfile, **changes: Any) -> dict[str, Any]:
    """The profile as its admin form posts it: ratios as percentages, steps as checkboxes."""
    data = model_to_dict(profile)
    data.pop("id", None)
    data["file_view_tools"] = json.dumps(data["file_view_tools"])
    for name in RATIO_FIELDS:
        data[name] = percent_text(data[name])
    data.update(changes)
    # A form posts an empty value for None (hard_limit, summarizer_config), and omits False.
    return {k: "" if v is None else v for k, v in data.items() if v is not False}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"trigger_ratio": 0}, "trigger_ratio"),
        ({"trigger_ratio": 150}, "trigger_ratio"),
        ({"tail_retention_ratio": -10}, "tail_retention_ratio"),
        ({"tail_retention_ratio": 150}, "tail_retention_ratio"),
        ({"middle_end": 0, "middle_start": 0}, "middle_end"),
        ({"keep_recent_messages": -1}, "keep_recent_messages"),
        ({"hard_limit": 1000}, "hard_limit"),  # under 0.92 x 200000
        ({"steps": ["summary", "dance"]}, "steps"),
        ({"middle_start": 90, "middle_end": 50}, "middle_start"),
    ],
)
def test_invalid_profiles_get_field_errors(changes: dict[str, Any], field: str) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    form = CompactionProfileForm(data=form_data(profile, **changes), instance=profile)
    assert not form.is_valid()
    assert field in form.errors, form.errors


def test_a_valid_profile_form_saves(db: Any) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    form = CompactionProfileForm(data=form_data(profile, hard_limit=195_000), instance=profile)
    assert form.is_valid(), form.errors
    form.save()
    assert CompactionProfile.objects.get(name="balanced").hard_limit == 195_000


def test_a_count_only_tail_ratio_of_zero_is_accepted(admin_client: Client) -> None:
    profile = CompactionProfile.objects.get(name="auto-compression")
    response = admin_client.post(
        f"/admin/sessions_app/compactionprofile/{profile.pk}/change/",
        form_data(profile, tail_retention_ratio=0),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    profile.refresh_from_db()
    assert profile.tail_retention_ratio == 0
    assert profile.to_policy().tail_retention_tokens == 0


def test_a_profile_change_in_the_admin_applies_to_the_next_compaction(
    admin_client: Client, make_session: Any, make_profile: Any, conversation: Any, scripted: Any
) -> None:
    scripted(default="summary")
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    session = make_session(messages=conversation(12), profile=profile)  # 200K tokens: far under
    assert prepare_context(session).skipped == "below_threshold"
    response = admin_client.post(
        f"/admin/sessions_app/compactionprofile/{profile.pk}/change/",
        form_data(profile, context_limit=2500),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    payload = prepare_context(session)
    assert payload.compaction is not None
    assert payload.compaction.trigger == "auto"
    assert payload.limit == 2500


def test_an_invalid_admin_change_is_refused(admin_client: Client, make_profile: Any) -> None:
    profile = make_profile()
    response = admin_client.post(
        f"/admin/sessions_app/compactionprofile/{profile.pk}/change/",
        form_data(profile, trigger_ratio=0),
    )
    assert response.status_code == 200
    assert "Must be a percentage in (0, 100]" in response.content.decode()
    profile.refresh_from_db()
    assert profile.trigger_ratio != 0


def test_compactions_are_read_only_with_escaped_archives(
    admin_client: Client, make_session: Any, make_profile: Any, conversation: Any
) -> None:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    hostile = [user("<script>alert(1)</script> " * 30), assistant("ok " * 60)]
    session = make_session(
        messages=hostile + conversation(10)[1:], context_limit=3000, profile=profile
    )
    compaction = compact_session(session, summarizer=ScriptedSummarizer(default="s")).compaction
    assert compaction is not None
    # The summarizer's text, then the engine's state block, which quotes the hostile first
    # request (docs/behaviour.md#what-a-summary-always-keeps): the summary holds it too.
    summary = compaction.summary
    assert summary.startswith(f"s\n\n{STATE_OPEN}\nFirst request: <script>alert(1)</script>")
    assert summary.endswith(f"\n{STATE_CLOSE}")
    page = admin_client.get(f"/admin/sessions_app/compaction/{compaction.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;session-state&gt;" in html  # the summary is shown, escaped
    assert STATE_OPEN not in html
    assert re.search(r"<pre[^>]*>", html)
    assert admin_client.get("/admin/sessions_app/compaction/add/").status_code == 403
    admin_client.post(f"/admin/sessions_app/compaction/{compaction.pk}/change/", {"summary": "x"})
    assert Compaction.objects.get(pk=compaction.pk).summary == summary


def test_api_keys_are_shown_once_and_revocable(admin_client: Client, user: Any) -> None:
    response = admin_client.post(
        "/admin/sessions_app/apikey/add/", {"user": user.pk, "name": "ci"}, follow=True
    )
    html = response.content.decode()
    match = re.search(r"(ctx_[0-9a-f]{12}_[A-Za-z0-9_\-]+)", html)
    assert match, html[:3000]
    key = match.group(1)
    row = ApiKey.objects.get(name="ci")
    assert row.key_hash == ApiKey.hash_key(key)
    assert JsonClient(key).get("/api/sessions").status_code == 200
    # Afterwards only the prefix is shown.
    listing = admin_client.get("/admin/sessions_app/apikey/").content.decode()
    detail = admin_client.get(f"/admin/sessions_app/apikey/{row.pk}/change/").content.decode()
    assert key not in listing
    assert key not in detail
    assert f"ctx_{row.lookup}" in listing
    admin_client.post(
        "/admin/sessions_app/apikey/",
        {"action": "revoke", "_selected_action": [row.pk]},
    )
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert JsonClient(key).get("/api/sessions").status_code == 401


CONFIGS = "/admin/sessions_app/summarizerconfig/"
CUSTOM = "tests.sessions_app.services.test_policies.KeywordSummarizer"


def config_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "fast",
        "description": "",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": "",
        "api_key_env": "CTXWEB_SUMMARY_KEY_TEST_OPENAI",
        "max_tokens": "",
        "timeout_seconds": "",
        "class_path": "",
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"model": ""}, "model", "The openai provider needs a model name."),
        ({"provider": "anthropic", "model": " "}, "model", "anthropic provider needs a model"),
        ({"base_url": "ftp://example.com/v1"}, "base_url", "http:// or https:// URL"),
        ({"base_url": "localhost:11434"}, "base_url", "http:// or https:// URL"),
        ({"base_url": "http://"}, "base_url", "http:// or https:// URL"),
        ({"api_key_env": "sk-proj-abc123"}, "api_key_env", "not the key itself"),
        ({"api_key_env": "1KEY"}, "api_key_env", "name of an environment variable"),
        ({"timeout_seconds": "0"}, "timeout_seconds", "more than 0"),
        ({"timeout_seconds": "601"}, "timeout_seconds", "less than or equal to 600"),
        ({"max_tokens": "0"}, "max_tokens", "greater than or equal to 1"),
        ({"max_tokens": "1000001"}, "max_tokens", "less than or equal to 1000000"),
        ({"provider": "custom"}, "class_path", "needs the dotted path"),
        ({"provider": "custom", "class_path": "no.such.Module"}, "class_path", "Cannot import"),
        ({"provider": "custom", "class_path": "json.dumps"}, "class_path", "is not a class"),
        ({"provider": "custom", "class_path": "json.JSONDecoder"}, "class_path", "not a summ"),
        (
            {
                "provider": "custom",
                "class_path": "tests.sessions_app.services.test_policies.NeedsEndpoint",
            },
            "class_path",
            "constructor cannot be called",
        ),
        ({"class_path": CUSTOM}, "class_path", "Only used by the custom provider"),
    ],
)
def test_the_admin_refuses_a_summarizer_config_that_cannot_work(
    admin_client: Client, changes: dict[str, Any], field: str, message: str
) -> None:
    response = admin_client.post(f"{CONFIGS}add/", config_data(**changes))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field], errors
    assert message in " ".join(errors[field]), errors[field]
    assert not SummarizerConfig.objects.exists()


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"provider": "extractive", "model": "", "api_key_env": ""},
        {"provider": "openai", "base_url": "http://ollama:11434/v1", "api_key_env": ""},
        {"provider": "anthropic", "model": "claude-haiku", "timeout_seconds": "600"},
        {"provider": "custom", "model": "", "class_path": CUSTOM, "max_tokens": "500"},
    ],
)
def test_the_admin_saves_a_summarizer_config_that_can_work(
    admin_client: Client, changes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_TEST_OPENAI", "sk-test")
    response = admin_client.post(f"{CONFIGS}add/", config_data(**changes))
    assert response.status_code == 302, response.context["adminform"].form.errors
    config = SummarizerConfig.objects.get(name="fast")
    assert config.provider == changes.get("provider", "openai")


def test_a_key_variable_unset_here_is_saved_with_a_warning(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXWEB_SUMMARY_KEY_TEST_OPENAI", raising=False)
    response = admin_client.post(f"{CONFIGS}add/", config_data(), follow=True)
    html = response.content.decode()
    assert "CTXWEB_SUMMARY_KEY_TEST_OPENAI is not set in this server" in html
    assert SummarizerConfig.objects.get(name="fast").api_key_env == "CTXWEB_SUMMARY_KEY_TEST_OPENAI"
    listing = admin_client.get(CONFIGS).content.decode()
    assert "gpt-4o-mini" in listing


def test_a_profile_takes_a_config_and_a_summary_input_limit_in_the_admin(
    admin_client: Client, make_profile: Any
) -> None:
    config = SummarizerConfig.objects.create(name="fast", provider="openai", model="gpt-4o-mini")
    profile = make_profile()
    url = f"/admin/sessions_app/compactionprofile/{profile.pk}/change/"
    refused = admin_client.post(url, form_data(profile, summary_input_limit=1_999))
    assert "summary_input_limit" in refused.context["adminform"].form.errors
    response = admin_client.post(
        url, form_data(profile, summarizer_config=config.pk, summary_input_limit=8_000)
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    profile.refresh_from_db()
    assert profile.summarizer_config == config
    assert profile.to_policy().summary_input_limit == 8_000
    assert '<td class="field-used_by">test</td>' in admin_client.get(CONFIGS).content.decode()


def test_a_config_in_use_cannot_be_deleted(admin_client: Client, make_profile: Any) -> None:
    config = SummarizerConfig.objects.create(name="fast", provider="extractive")
    make_profile(summarizer_config=config)
    admin_client.post(f"{CONFIGS}{config.pk}/delete/", {"post": "yes"})
    assert SummarizerConfig.objects.filter(pk=config.pk).exists()


PROFILES = "/admin/sessions_app/compactionprofile/"


def test_the_profile_form_shows_ratios_as_percentages(admin_client: Client) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    profile.trigger_ratio, profile.middle_start = 0.92, 1 / 6
    profile.save()
    page = admin_client.get(f"{PROFILES}{profile.pk}/change/")
    form = page.context["adminform"].form
    assert form["trigger_ratio"].value() == "92"
    assert form["middle_start"].value() == "16.6667"
    assert 'name="trigger_ratio" value="92"' in page.content.decode()
    assert (
        '<td class="field-trigger_percent">92%</td>' in admin_client.get(PROFILES).content.decode()
    )


def test_an_unchanged_rounded_percentage_keeps_its_exact_ratio(admin_client: Client) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    profile.middle_start = 1 / 6
    profile.save()
    response = admin_client.post(f"{PROFILES}{profile.pk}/change/", form_data(profile))
    assert response.status_code == 302, response.context["adminform"].form.errors
    profile.refresh_from_db()
    assert profile.middle_start == 1 / 6


def test_a_percentage_is_stored_as_a_ratio(admin_client: Client) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    changes = {"trigger_ratio": "80", "tail_retention_ratio": "12.5", "min_recall": "0"}
    response = admin_client.post(f"{PROFILES}{profile.pk}/change/", form_data(profile, **changes))
    assert response.status_code == 302, response.context["adminform"].form.errors
    profile.refresh_from_db()
    assert (profile.trigger_ratio, profile.tail_retention_ratio, profile.min_recall) == (
        0.8,
        0.125,
        0.0,
    )
    assert profile.to_policy().threshold == 160_000


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("trigger_ratio", "150", "Must be a percentage in (0, 100]."),
        ("trigger_ratio", "0", "Must be a percentage in (0, 100]."),
        ("min_recall", "-1", "Must be a percentage in [0, 100]."),
        ("middle_end", "100.5", "Must be a percentage in (0, 100]."),
    ],
)
def test_a_percentage_out_of_range_is_refused_on_its_field(
    admin_client: Client, field: str, value: str, message: str
) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    before = getattr(profile, field)
    response = admin_client.post(
        f"{PROFILES}{profile.pk}/change/", form_data(profile, **{field: value})
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field], errors
    assert errors[field] == [message]
    profile.refresh_from_db()
    assert getattr(profile, field) == before


def test_steps_are_checked_from_a_list_and_stored_in_the_engines_order(
    admin_client: Client,
) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    url = f"{PROFILES}{profile.pk}/change/"
    html = admin_client.get(url).content.decode()
    for step in STEPS:
        assert f'type="checkbox" name="steps" value="{step}"' in html
    chosen = ["hard_truncate", "summary", "offload"]
    response = admin_client.post(url, form_data(profile, steps=chosen))
    assert response.status_code == 302, response.context["adminform"].form.errors
    profile.refresh_from_db()
    assert profile.steps == ["offload", "summary", "hard_truncate"]
    assert profile.to_policy().steps == ("offload", "summary", "hard_truncate")


def test_an_empty_chain_shows_the_default_steps_checked(admin_client: Client) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    profile.steps = []
    profile.save()
    form = admin_client.get(f"{PROFILES}{profile.pk}/change/").context["adminform"].form
    assert form["steps"].value() == list(Policy().steps)


#: Each number field's help text names its unit.
UNITS = (
    "tokens",
    "messages",
    "seconds",
    "characters",
    "%",
    "lines",
    "rounds",
    "retries",
    "blocks",
    "(x)",
)
#: Fields that are not numbers with a unit.
UNITLESS = (
    "enabled",
    "encoding",
    "summary_model",
    "fold_merge_functions",
    "fold_seed",
    "file_view_tools",
)


def test_profile_sections_say_what_they_do_and_every_field_has_help(
    admin_client: Client,
) -> None:
    profile = CompactionProfile.objects.get(name="balanced")
    page = admin_client.get(f"{PROFILES}{profile.pk}/change/")
    adminform = page.context["adminform"]
    titles = [fieldset.name for fieldset in adminform]
    assert "When to compact" in titles
    assert "Truncation fallbacks" in titles
    for title in titles:
        assert title
        assert not re.search(r"seed|spec|\b[A-Z]{1,4}-?\d+\b", title, re.I), title
    shown = {
        name for fieldset in adminform for line in fieldset for f in line for name in [f.field.name]
    }
    assert set(CompactionProfile.POLICY_FIELDS) <= shown
    form = adminform.form
    for name in form.fields:
        assert form.fields[name].help_text, name
    for name in CompactionProfile.POLICY_FIELDS:
        if name in (
            "enabled",
            "encoding",
            "summary_model",
            "fold_merge_functions",
            "steps",
            "file_view_tools",
        ):
            continue
        text = form.fields[name].help_text.lower()
        assert any(unit in text for unit in UNITS), (name, text)
