"""Named summarizer configurations: which model writes a profile's summaries, and how.

A `SummarizerConfig` is edited in the admin and referenced by any number of compaction
profiles. It stores the provider, the model, the base URL, the *name* of the environment
variable that holds the API key (never the key itself), max tokens and a timeout; a
user-defined summarizer is a class named by its dotted path; the provider `upstream`
writes a proxied session's summaries through its conversation's own upstream and key, with
no URL or key of its own. `clean()` refuses a configuration that cannot work, each problem
on its field. See docs/summarizers.md.

The variable must be one meant for summary keys (`key_env_allowed`): its name starts with
`CTXWEB_SUMMARY_KEY_`, or the operator lists it in `CTXWEB_SUMMARY_KEY_ENVS`; the app's own
secrets never qualify. The rule is checked when the key is read, not only on save
(docs/deployment.md, "Secrets").
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Final
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils.module_loading import import_string

__all__ = [
    "CONSTRUCTOR_KEYWORDS",
    "KEY_ENV_RULE",
    "MAX_TIMEOUT_SECONDS",
    "SUMMARY_KEY_PREFIX",
    "SummarizerConfig",
    "constructor_kwargs",
    "key_env_allowed",
    "load_summarizer_class",
]

#: The keyword arguments a custom summarizer class may accept (docs/summarizers.md).
CONSTRUCTOR_KEYWORDS: Final = ("model", "base_url", "api_key", "max_tokens", "timeout")
#: The engine's bound on a summary request's timeout (Policy.summary_timeout_seconds).
MAX_TIMEOUT_SECONDS: Final = 600.0
#: No model writes a longer answer; a larger value is a typo.
MAX_OUTPUT_TOKENS: Final = 1_000_000

_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_env_name = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*\Z",
    "Enter the name of an environment variable (letters, digits and underscores, not "
    "starting with a digit), not the key itself.",
)


#: Every variable whose name starts with it may hold a summary key.
SUMMARY_KEY_PREFIX: Final = "CTXWEB_SUMMARY_KEY_"
#: The app's own settings: never a summary key, even when the operator lists one.
_NEVER_PREFIXES: Final = ("DJANGO_", "CTXWEB_")
_NEVER_NAMES: Final = frozenset({"DATABASE_URL"})
#: The rule, as told on a refused save: the same whatever the environment holds.
KEY_ENV_RULE: Final = (
    f"Name a variable meant for summary keys: {SUMMARY_KEY_PREFIX}<NAME>, or one the "
    "operator lists in CTXWEB_SUMMARY_KEY_ENVS (docs/summarizers.md#the-api-key)."
)


def key_env_allowed(name: str) -> bool:
    """True when a configuration may read its key from the variable `name`.

    `CTXWEB_SUMMARY_KEY_<NAME>`, or a name in settings.CTXWEB_SUMMARY_KEY_ENVS that is not
    one of the app's own (DJANGO_*, other CTXWEB_*, DATABASE_URL). Whether the variable is
    set plays no part.
    """
    if name.startswith(SUMMARY_KEY_PREFIX) and len(name) > len(SUMMARY_KEY_PREFIX):
        return True
    if name in _NEVER_NAMES or name.startswith(_NEVER_PREFIXES):
        return False
    return name in _listed_key_envs()


def _listed_key_envs() -> frozenset[str]:
    """settings.CTXWEB_SUMMARY_KEY_ENVS: a list of names, or one comma-separated string."""
    listed: Any = getattr(settings, "CTXWEB_SUMMARY_KEY_ENVS", ())
    if isinstance(listed, str):
        listed = listed.split(",")
    return frozenset(str(name).strip() for name in listed if str(name).strip())


def load_summarizer_class(path: str) -> type[Any]:
    """The summarizer class at the dotted `path`; ValueError saying why it is not one.

    A summarizer class defines a `summarize(request)` method and a `name` (a class
    attribute or a property), as `compaction.Summarizer` asks.
    """
    try:
        target = import_string(path)
    except Exception as error:  # ImportError, but also whatever the module raises on import
        raise ValueError(f"Cannot import {path!r}: {error}") from error
    if not inspect.isclass(target):
        raise ValueError(f"{path!r} is not a class.")
    if not callable(getattr(target, "summarize", None)) or not hasattr(target, "name"):
        raise ValueError(
            f"{path!r} is not a summarizer: it needs a summarize(request) method and a name."
        )
    return target


def constructor_kwargs(cls: type[Any], values: dict[str, Any]) -> dict[str, Any]:
    """The subset of `values` that `cls(...)` accepts by keyword (all of them with **kwargs).

    Raises ValueError when the constructor needs an argument the configuration cannot give.
    """
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no introspectable signature: offer nothing
        return {}
    params = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        accepted = dict(values)
    else:
        by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        accepted = {k: v for k, v in values.items() if k in params and params[k].kind in by_keyword}
    try:
        signature.bind(**accepted)
    except TypeError as error:
        raise ValueError(
            f"Its constructor cannot be called with the keywords a configuration gives "
            f"({', '.join(CONSTRUCTOR_KEYWORDS)}): {error}"
        ) from error
    return accepted


class SummarizerConfig(models.Model):
    """A named summarizer: provider, model, endpoint and the env var holding its key."""

    class Provider(models.TextChoices):
        EXTRACTIVE = "extractive", "Extractive (offline, deterministic)"
        ANTHROPIC = "anthropic", "Anthropic Messages API (or a compatible server)"
        OPENAI = "openai", "OpenAI Chat Completions (Azure, Ollama, vLLM, OpenRouter...)"
        CUSTOM = "custom", "Custom class (dotted path)"
        UPSTREAM = "upstream", "The proxied conversation's own upstream and key"

    #: Providers that call a model, and so need its name.
    MODEL_PROVIDERS: Final = (Provider.ANTHROPIC, Provider.OPENAI)

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    provider = models.CharField(
        max_length=16, choices=Provider.choices, default=Provider.EXTRACTIVE
    )
    model = models.CharField(
        max_length=200,
        blank=True,
        help_text="Required for anthropic and openai, e.g. gpt-4o-mini; for upstream, empty: "
        "the conversation's own model.",
    )
    base_url = models.CharField(
        "base URL",
        max_length=500,
        blank=True,
        help_text="http(s) URL of the API; empty: the provider's own (or its *_BASE_URL env var).",
    )
    api_key_env = models.CharField(
        "API key environment variable",
        max_length=128,
        blank=True,
        validators=[_env_name],
        help_text="The NAME of the environment variable holding the key (e.g. OPENAI_API_KEY), "
        "read when a compaction runs; the key itself is never stored.",
    )
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_OUTPUT_TOKENS)],
        help_text="Cap of one summary answer; empty: the profile's summary_max_tokens.",
    )
    timeout_seconds = models.FloatField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(MAX_TIMEOUT_SECONDS)],
        help_text="Per request, in (0, 600]; empty: the profile's summary_timeout_seconds.",
    )
    class_path = models.CharField(
        "class path",
        max_length=300,
        blank=True,
        help_text="Custom provider only: dotted path of a summarizer class.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "sessions_app"
        ordering = ["name"]
        verbose_name = "summarizer configuration"

    def __str__(self) -> str:
        return f"{self.name} ({self.provider}{f': {self.model}' if self.model else ''})"

    def clean(self) -> None:
        """Refuse a configuration that cannot work, each problem on its field."""
        errors: dict[str, str] = {}
        if self.provider in self.MODEL_PROVIDERS and not self.model.strip():
            errors["model"] = f"The {self.provider} provider needs a model name."
        name = self.api_key_env.strip()
        if name and _ENV_NAME.match(name) and not key_env_allowed(name):
            errors["api_key_env"] = KEY_ENV_RULE
        if self.base_url and not _is_http_url(self.base_url):
            errors["base_url"] = "Enter an http:// or https:// URL with a host."
        errors.update(self._upstream_errors())
        if self.timeout_seconds is not None and not self.timeout_seconds > 0:
            errors["timeout_seconds"] = "Must be more than 0 seconds."
        class_error = self._class_path_error()
        if class_error:
            errors["class_path"] = class_error
        if errors:
            raise ValidationError(errors)

    def _upstream_errors(self) -> dict[str, str]:
        """The `upstream` provider's URL and key are the proxy's: none of its own."""
        if self.provider != self.Provider.UPSTREAM:
            return {}
        unused = "Not used by the upstream provider (it uses the proxy's upstream): clear it."
        fields = {"base_url": self.base_url, "api_key_env": self.api_key_env}
        return {name: unused for name, value in fields.items() if value.strip()}

    def _class_path_error(self) -> str | None:
        if self.provider != self.Provider.CUSTOM:
            return "Only used by the custom provider: clear it." if self.class_path else None
        if not self.class_path.strip():
            return "The custom provider needs the dotted path of a summarizer class."
        try:
            cls = load_summarizer_class(self.class_path.strip())
            constructor_kwargs(cls, dict.fromkeys(CONSTRUCTOR_KEYWORDS))
        except ValueError as error:
            return str(error)
        return None


def _is_http_url(value: str) -> bool:
    if any(ch.isspace() for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError on a port out of range
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and bool(parts.hostname)
