"""sessions_app.summarizer_config: the model's rules, the class-path contract, the schema."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from compaction import Policy
from compaction.policy import MAX_SUMMARY_INPUT_LIMIT, MIN_SUMMARY_INPUT_LIMIT
from sessions_app.models import CompactionProfile
from sessions_app.summarizer_config import (
    MAX_TIMEOUT_SECONDS,
    SummarizerConfig,
    constructor_kwargs,
    load_summarizer_class,
)

pytestmark = pytest.mark.django_db  # full_clean() checks the name is unique


def problems(config: SummarizerConfig) -> dict[str, list[str]]:
    try:
        config.full_clean()
    except ValidationError as error:
        return error.message_dict
    return {}


def test_an_extractive_config_needs_nothing_else() -> None:
    assert problems(SummarizerConfig(name="offline")) == {}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_model_provider_needs_a_model(provider: str) -> None:
    assert list(problems(SummarizerConfig(name="x", provider=provider))) == ["model"]
    assert problems(SummarizerConfig(name="x", provider=provider, model="m")) == {}


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://api.openai.com/v1", True),
        ("http://127.0.0.1:11434/v1", True),
        ("http://ollama:11434/v1", True),  # a compose service name: no dot, still a host
        ("https://example.openai.azure.com/openai/v1/", True),
        ("ftp://example.com", False),
        ("example.com/v1", False),
        ("http:///v1", False),
        ("http://exa mple.com", False),
        ("http://localhost:99999/v1", False),
        ("javascript:alert(1)", False),
    ],
)
def test_base_urls_are_http_with_a_host(url: str, ok: bool) -> None:
    config = SummarizerConfig(name="x", provider="openai", model="m", base_url=url)
    assert (problems(config) == {}) is ok


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("OPENAI_API_KEY", True),
        ("CTXWEB_SUMMARY_KEY_team2", True),
        ("sk-ant-api03-abc", False),
        ("2KEY", False),
        ("MY KEY", False),
        ("KEY\n", False),
    ],
)
def test_the_key_variable_is_an_identifier(name: str, ok: bool) -> None:
    config = SummarizerConfig(name="x", api_key_env=name)
    assert (problems(config) == {}) is ok


def test_the_timeout_bound_is_the_policy_bound() -> None:
    assert MAX_TIMEOUT_SECONDS == 600.0
    Policy(summary_timeout_seconds=MAX_TIMEOUT_SECONDS)  # accepted by the engine too
    assert list(problems(SummarizerConfig(name="x", timeout_seconds=-1))) == ["timeout_seconds"]


def test_the_profile_summary_input_limit_has_the_policy_default_and_bounds() -> None:
    field = CompactionProfile._meta.get_field("summary_input_limit")
    assert field.default == Policy().summary_input_limit
    bounds = sorted(v.limit_value for v in field.validators if hasattr(v, "limit_value"))
    assert bounds == [MIN_SUMMARY_INPUT_LIMIT, MAX_SUMMARY_INPUT_LIMIT]
    assert "summary_input_limit" in CompactionProfile.POLICY_FIELDS


class Plain:
    name = "plain"

    def __init__(self, model: str, *, timeout: float = 1.0, other: int = 0) -> None:
        self.model = model

    def summarize(self, request: Any) -> str:
        return ""


def test_the_constructor_gets_only_the_keywords_it_names() -> None:
    values = {"model": "m", "base_url": None, "api_key": "k", "max_tokens": 5, "timeout": 2.0}
    assert constructor_kwargs(Plain, values) == {"model": "m", "timeout": 2.0}
    assert load_summarizer_class(f"{__name__}.Plain") is Plain


def test_a_module_failing_on_import_is_reported_not_raised() -> None:
    with pytest.raises(ValueError, match="Cannot import"):
        load_summarizer_class("tests.sessions_app.no_module_here.Summarizer")
    with pytest.raises(ValueError, match="Cannot import"):
        load_summarizer_class("nodots")


def test_the_migrations_match_the_models() -> None:
    out = io.StringIO()
    call_command("makemigrations", "sessions_app", "--check", "--dry-run", stdout=out)
