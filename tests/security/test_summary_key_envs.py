"""A summarizer configuration can read its key only from a variable meant for summary keys
(issue 30 item 1; docs/deployment.md, "Secrets"; docs/summarizers.md#the-api-key).

A staff user with the add/change permissions on configurations and profiles must not get a
server secret sent to a server of theirs: the key's variable, the base URL and the class
path are a superuser's to set, the rule holds where the key is read (a row written before
the rule or through the shell cannot leak either), and no text tells which variables exist.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.test import Client

from sessions_app.models import (
    ApiKey,
    CompactionJob,
    CompactionProfile,
    Session,
    SummarizerConfig,
)
from sessions_app.services.background.jobs import enqueue_compaction, run_job
from sessions_app.services.errors import Unavailable
from sessions_app.services.sessions.lifecycle import create_session
from sessions_app.services.sessions.policies import summarizer_for
from sessions_app.summarizer_config import KEY_ENV_RULE, key_env_allowed
from tests.support.histories import synthetic_history

pytestmark = pytest.mark.django_db

CONFIGS = "/admin/sessions_app/summarizerconfig/"
SECRET = "django-insecure-the-server-secret-0123456789"
APP_SECRETS = ("DJANGO_SECRET_KEY", "CTXWEB_UPSTREAM_ANTHROPIC_API_KEY", "DATABASE_URL")


@pytest.fixture(autouse=True)
def _no_fake_summarizer(settings: Any) -> None:
    settings.CTXWEB_SUMMARIZER_CLASS = ""  # the configuration itself builds the summarizer


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in APP_SECRETS:
        monkeypatch.setenv(name, SECRET)


def config_data(**changes: Any) -> dict[str, Any]:
    data = {
        "name": "mine",
        "description": "",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": "",
        "api_key_env": "",
        "max_tokens": "",
        "timeout_seconds": "",
        "class_path": "",
    }
    return {**data, **changes}


def staff_client() -> Client:
    """A staff user, not a superuser, allowed to add and change configurations and profiles."""
    user = get_user_model().objects.create_user("staff", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=[
                f"{action}_{model}"
                for action in ("add", "change", "view")
                for model in ("summarizerconfig", "compactionprofile")
            ]
        )
    )
    client = Client()
    client.force_login(user)
    return client


def superuser_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "", "pw-root-123"))
    return client


# The rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("CTXWEB_SUMMARY_KEY_FAST", True),
        ("ANTHROPIC_API_KEY", True),  # the default CTXWEB_SUMMARY_KEY_ENVS
        ("OPENAI_API_KEY", True),
        ("CTXWEB_SUMMARY_KEY_", False),  # the prefix alone names nothing
        ("DJANGO_SECRET_KEY", False),
        ("CTXWEB_UPSTREAM_ANTHROPIC_API_KEY", False),
        ("CTXWEB_UPSTREAM_OPENAI_API_KEY", False),
        ("CTXWEB_REDIS_URL", False),
        ("DATABASE_URL", False),
        ("AWS_SECRET_ACCESS_KEY", False),
        ("openai_api_key", False),  # names are case-sensitive
    ],
)
def test_which_variables_a_configuration_may_name(name: str, allowed: bool) -> None:
    assert key_env_allowed(name) is allowed


def test_the_operator_list_adds_names_but_never_the_apps_own(settings: Any) -> None:
    settings.CTXWEB_SUMMARY_KEY_ENVS = "TEAM_KEY, DJANGO_SECRET_KEY,CTXWEB_UPSTREAM_OPENAI_API_KEY"
    assert key_env_allowed("TEAM_KEY")
    assert not key_env_allowed("OPENAI_API_KEY")  # no longer listed
    assert not key_env_allowed("DJANGO_SECRET_KEY")
    assert not key_env_allowed("CTXWEB_UPSTREAM_OPENAI_API_KEY")
    settings.CTXWEB_SUMMARY_KEY_ENVS = []
    assert not key_env_allowed("ANTHROPIC_API_KEY")
    assert key_env_allowed("CTXWEB_SUMMARY_KEY_TEAM")


@pytest.mark.parametrize("name", APP_SECRETS)
def test_a_configuration_naming_an_app_secret_is_refused_alike_set_or_not(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = []
    for value in (SECRET, None):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        config = SummarizerConfig(name="mine", provider="openai", model="m", api_key_env=name)
        try:
            config.full_clean()
        except ValidationError as error:
            errors.append(error.message_dict)
    assert errors == [{"api_key_env": [KEY_ENV_RULE]}] * 2


# Where the key is read ------------------------------------------------------------------


def _row(base_url: str, name: str = "DJANGO_SECRET_KEY") -> CompactionProfile:
    """A configuration written around the admin (the shell, or before the rule)."""
    config = SummarizerConfig.objects.create(
        name="mine", provider="openai", model="gpt-4o-mini", base_url=base_url, api_key_env=name
    )
    return CompactionProfile.objects.create(
        name="leaky", summarizer_config=config, steps=["summary"], keep_recent_messages=4
    )


def _session(profile: CompactionProfile) -> Session:
    owner = get_user_model().objects.create_user("owner")
    history = synthetic_history(40, words_per_message=60)
    return create_session(owner, messages=history, context_limit=3000, profile=profile)


@pytest.mark.usefixtures("secrets")
@pytest.mark.parametrize("name", APP_SECRETS)
def test_a_stored_row_naming_a_secret_fails_the_job_and_sends_nothing(
    fake_openai: Any, name: str
) -> None:
    session = _session(_row(fake_openai.base_url, name))
    job = enqueue_compaction(session, params={"trigger": "manual"})
    run_job(str(job.pk))
    job = CompactionJob.objects.get(pk=job.pk)
    assert job.status == "failed"
    assert "cannot read its API key" in job.error
    assert SECRET not in job.error
    assert fake_openai.requests == []
    assert session.compactions.filter(status="succeeded").count() == 0


@pytest.mark.usefixtures("secrets")
def test_the_api_caller_learns_nothing_about_which_variables_exist(
    fake_openai: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(_row(fake_openai.base_url))
    _, key = ApiKey.issue(session.owner, "k")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    url = f"/api/sessions/{session.pk}/compactions"
    answers = []
    # Not allowed and set; not allowed and unset; allowed and unset: one sentence.
    for name, value in (
        ("DJANGO_SECRET_KEY", SECRET),
        ("DJANGO_SECRET_KEY", None),
        ("CTXWEB_SUMMARY_KEY_NONE", None),
    ):
        SummarizerConfig.objects.update(api_key_env=name)
        if value is None:
            monkeypatch.delenv(name, raising=False)
        response = client.post(url, {}, content_type="application/json")
        assert response.status_code == 503, response.content
        answers.append(response.json()["detail"].replace(name, "<NAME>"))
        assert SECRET not in response.content.decode()
    assert len(set(answers)) == 1, answers
    assert fake_openai.requests == []


def test_an_allowed_variable_is_sent_as_the_key(
    fake_openai: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXWEB_SUMMARY_KEY_MINE", "sk-summary-key")
    profile = _row(fake_openai.base_url, "CTXWEB_SUMMARY_KEY_MINE")
    summarizer = summarizer_for(profile)
    assert summarizer._client.api_key == "sk-summary-key"  # type: ignore[attr-defined]


@pytest.mark.usefixtures("secrets")
def test_summarizer_for_refuses_a_secret_even_when_listed(settings: Any, fake_openai: Any) -> None:
    settings.CTXWEB_SUMMARY_KEY_ENVS = "DJANGO_SECRET_KEY"
    with pytest.raises(Unavailable) as info:
        summarizer_for(_row(fake_openai.base_url))
    assert SECRET not in str(info.value)


# The admin ------------------------------------------------------------------------------


def test_staff_see_the_key_variable_base_url_and_class_path_read_only() -> None:
    page = staff_client().get(f"{CONFIGS}add/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    assert {"api_key_env", "base_url", "class_path"}.isdisjoint(form.fields)
    html = page.content.decode()
    assert 'name="api_key_env"' not in html
    assert 'name="base_url"' not in html


@pytest.mark.usefixtures("secrets")
def test_staff_cannot_set_them_by_posting_them() -> None:
    data = config_data(api_key_env="DJANGO_SECRET_KEY", base_url="http://attacker.example/v1")
    response = staff_client().post(f"{CONFIGS}add/", data)
    assert response.status_code == 302, response.content
    config = SummarizerConfig.objects.get(name="mine")
    assert (config.api_key_env, config.base_url, config.class_path) == ("", "", "")


@pytest.mark.usefixtures("secrets")
def test_staff_editing_a_row_that_breaks_the_rule_get_a_form_error_not_a_500(
    fake_openai: Any,
) -> None:
    config = _row(fake_openai.base_url).summarizer_config
    assert config is not None
    response = staff_client().post(f"{CONFIGS}{config.pk}/change/", config_data(model="other"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.non_field_errors()
    assert any(KEY_ENV_RULE in text for text in errors), errors
    config.refresh_from_db()
    assert config.model == "gpt-4o-mini"


@pytest.mark.usefixtures("secrets")
def test_a_superuser_naming_a_secret_gets_the_rule_and_no_hint_it_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = superuser_client()
    response = client.post(f"{CONFIGS}add/", config_data(api_key_env="DJANGO_SECRET_KEY"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"api_key_env": [KEY_ENV_RULE]}
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    again = client.post(f"{CONFIGS}add/", config_data(api_key_env="DJANGO_SECRET_KEY"))
    assert again.context["adminform"].form.errors == {"api_key_env": [KEY_ENV_RULE]}
    assert not SummarizerConfig.objects.exists()


def test_a_superuser_sets_an_allowed_variable_with_a_warning_only_when_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CTXWEB_SUMMARY_KEY_MINE", raising=False)
    client = superuser_client()
    data = config_data(api_key_env="CTXWEB_SUMMARY_KEY_MINE", base_url="http://127.0.0.1:9/v1")
    response = client.post(f"{CONFIGS}add/", data, follow=True)
    assert "CTXWEB_SUMMARY_KEY_MINE is not set" in response.content.decode()
    config = SummarizerConfig.objects.get(name="mine")
    assert (config.api_key_env, config.base_url) == (
        "CTXWEB_SUMMARY_KEY_MINE",
        "http://127.0.0.1:9/v1",
    )
