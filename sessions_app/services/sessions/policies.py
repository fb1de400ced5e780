"""Which profile, policy and summarizer a session uses, read fresh on every call
(docs/behaviour.md#profiles).

A profile's summarizer comes from its summarizer configuration (`SummarizerConfig`,
docs/summarizers.md) when it has one; else from its `summarizer` choice and the settings
(ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CTXWEB_SUMMARY_MODEL), as before configurations.
A configuration of the provider `upstream` writes a proxied session's summaries through its
conversation's upstream (services/proxying/summaries.py); where it cannot, the profile's
`summarizer` choice does.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from compaction import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    OpenAISummarizer,
    Policy,
    PolicyError,
    Summarizer,
    UnknownEncodingError,
    get_encoding,
)
from sessions_app.models import CompactionProfile, Session, SummarizerConfig
from sessions_app.services.errors import InvalidInput, Unavailable, engine_error
from sessions_app.services.proxying.summaries import conversation_summarizer, upstream_summarizer
from sessions_app.services.sessions.overhead import session_overhead
from sessions_app.summarizer_config import (
    constructor_kwargs,
    key_env_allowed,
    load_summarizer_class,
)

__all__ = [
    "default_profile",
    "policy_for",
    "profile_encoding",
    "profile_for",
    "summarizer_for",
    "summary_model",
]

logger = logging.getLogger("sessions_app")

Provider = SummarizerConfig.Provider


def default_profile() -> CompactionProfile:
    """The profile marked default, else `balanced`, else an unsaved one with Policy defaults."""
    profile = (
        CompactionProfile.objects.filter(is_default=True).order_by("name").first()
        or CompactionProfile.objects.filter(name="balanced").first()
    )
    return profile or CompactionProfile(name="balanced")


def profile_for(session: Session | None, name: str | None = None) -> CompactionProfile:
    """The profile named `name`, else the session's, else the default; always a fresh read.

    An unknown name is an InvalidInput on the field `profile`: a 422 in the API and the
    pages, a CommandError naming the field in `manage.py compact`.
    """
    if name:
        profile = CompactionProfile.objects.filter(name=name).first()
        if profile is None:
            known = ", ".join(CompactionProfile.objects.values_list("name", flat=True))
            raise InvalidInput.field("profile", f"unknown profile {name!r}; known: {known}")
        return profile
    if session is not None and session.profile_id is not None:
        profile = CompactionProfile.objects.filter(pk=session.profile_id).first()
        if profile is not None:
            return profile
    return default_profile()


def policy_for(session: Session | None, profile: CompactionProfile | None = None) -> Policy:
    """The engine Policy of `profile` (default: the session's), with the session's limit
    (narrowed to the window its upstream was found to have, `upstream_window`),
    reserving the tokens of a proxied session's stored system prompt and tools
    (`reserved_tokens`: they go upstream with every call; services/sessions/overhead.py).

    A stored profile the engine refuses (one written around the admin's checks) is an
    InvalidInput naming the policy field, not the engine's PolicyError.
    """
    profile = profile or profile_for(session)
    limit = session.context_limit if session is not None else None
    window = session.upstream_window if session is not None else None
    if window:  # learned from the upstream's refusal (docs/behaviour.md#overflow-recovery)
        limit = min(limit or profile.context_limit, window)
    try:
        policy = profile.to_policy(context_limit=limit)
    except PolicyError as error:
        raise engine_error(error) from error
    reserved = session_overhead(session).total if session is not None else 0
    return policy.replace(reserved_tokens=reserved) if reserved else policy


def profile_encoding(profile: CompactionProfile) -> str:
    """The profile's token encoding, for counting outside a compaction.

    An encoding the engine does not know (a row written around the admin's checks, which
    refuse it) is an InvalidInput on the field `encoding`: a 422, never the engine's
    UnknownEncodingError (a 500).
    """
    try:
        get_encoding(profile.encoding)  # loaded once per process, then cached
    except UnknownEncodingError as error:
        raise InvalidInput.field("encoding", f"profile {profile.name!r}: {error}") from None
    return profile.encoding


def summary_model(profile: CompactionProfile) -> str:
    """The summary model: the configuration's, else the profile's, else CTXWEB_SUMMARY_MODEL."""
    config = _config_of(profile)
    if config is not None and config.provider != Provider.UPSTREAM:
        return config.model if config.provider != Provider.EXTRACTIVE else ""
    if config is not None and config.model.strip():
        return config.model.strip()
    return profile.summary_model or str(getattr(settings, "CTXWEB_SUMMARY_MODEL", "") or "")


def summarizer_for(profile: CompactionProfile, session: Session | None = None) -> Summarizer:
    """The summarizer a profile asks for, for `session` (the one compacted, when known).

    With a summarizer configuration: the one it describes (`_configured`); one of the
    provider `upstream` writes through the conversation's upstream (`_through_upstream`)
    and, where it cannot, gives way to the profile's `summarizer` choice. That choice:
    `auto` is AnthropicSummarizer when an API key and a model are configured, else
    ExtractiveSummarizer. settings.CTXWEB_SUMMARIZER_CLASS (the dotted path of a class or
    function taking the profile and returning a Summarizer) overrides everything: plug-ins
    and test fakes use it.
    """
    override = str(getattr(settings, "CTXWEB_SUMMARIZER_CLASS", "") or "")
    if override:
        factory = import_string(override)
        summarizer: Summarizer = factory(profile)
        return summarizer
    config = _config_of(profile)
    if config is not None and config.provider == Provider.UPSTREAM:
        through = _through_upstream(config, profile, session)
        if through is not None:
            return through
    elif config is not None:
        return _configured(config, profile)
    return _chosen(profile, session)


def _chosen(profile: CompactionProfile, session: Session | None = None) -> Summarizer:
    """The profile's `summarizer` choice, with the settings' key and model. `auto`, with no
    Anthropic key and model set, writes a proxied session's summaries through its
    conversation's upstream (its model, unless the profile names one), the extractive
    summary where none can or once it fails (docs/summarizers.md#without-a-configuration)."""
    kind = profile.summarizer
    model = summary_model(profile)
    api_key = str(getattr(settings, "ANTHROPIC_API_KEY", "") or "")
    if kind == CompactionProfile.SummarizerKind.ANTHROPIC and not model:
        raise InvalidInput.field("summary_model", "the anthropic summarizer needs a summary model")
    if kind == CompactionProfile.SummarizerKind.ANTHROPIC or (
        kind == CompactionProfile.SummarizerKind.AUTO and api_key and model
    ):
        return _anthropic(
            model, max_tokens=profile.summary_max_tokens, timeout=profile.summary_timeout_seconds
        )
    if kind == CompactionProfile.SummarizerKind.AUTO:
        own = conversation_summarizer(
            session,
            model=profile.summary_model.strip(),
            max_tokens=profile.summary_max_tokens,
            timeout=profile.summary_timeout_seconds,
        )
        if own is not None:
            return own
    return ExtractiveSummarizer()


def _through_upstream(
    config: SummarizerConfig, profile: CompactionProfile, session: Session | None
) -> Summarizer | None:
    """The `upstream` configuration's summarizer (its model, else the conversation's);
    None where no upstream can write it (services/proxying/summaries.py)."""
    try:
        return upstream_summarizer(
            session,
            model=config.model.strip(),
            max_tokens=config.max_tokens,
            timeout=config.timeout_seconds or profile.summary_timeout_seconds,
        )
    except Exception as error:  # the provider's SDK not installed, a client it refuses...
        logger.exception("summarizer configuration %r cannot be used", config.name)
        raise Unavailable(
            f"summarizer configuration {config.name!r} cannot be used: {error}"
        ) from error


def _anthropic(model: str, **values: Any) -> AnthropicSummarizer:
    """An AnthropicSummarizer; the key and base URL of the settings where none is given."""
    values["api_key"] = values.get("api_key") or _setting("ANTHROPIC_API_KEY")
    values["base_url"] = values.get("base_url") or _setting("ANTHROPIC_BASE_URL")
    return AnthropicSummarizer(model, **values)


def _config_of(profile: CompactionProfile) -> SummarizerConfig | None:
    if profile.summarizer_config_id is None:
        return None
    config: SummarizerConfig | None = profile.summarizer_config
    return config


def _configured(config: SummarizerConfig, profile: CompactionProfile) -> Summarizer:
    """The summarizer `config` describes, its key read from the named env var now.

    Raises Unavailable, naming the configuration, when it cannot be built here: its key's
    environment variable is not set, the provider's SDK is not installed, or its custom
    class no longer imports or refuses the arguments. No compaction is attempted then.
    """
    if config.provider == Provider.EXTRACTIVE:
        return ExtractiveSummarizer()
    values: dict[str, Any] = {
        "model": config.model.strip() or None,
        "base_url": config.base_url.strip() or None,
        "api_key": _api_key(config),
        "max_tokens": config.max_tokens,  # None: the request's cap, summary_max_tokens
        "timeout": config.timeout_seconds or profile.summary_timeout_seconds,
    }
    try:
        return _build(config, values)
    except Unavailable:
        raise
    except Exception as error:  # an SDK not installed, a custom constructor failing...
        logger.exception("summarizer configuration %r cannot be used", config.name)
        raise Unavailable(
            f"summarizer configuration {config.name!r} cannot be used: {error}"
        ) from error


def _build(config: SummarizerConfig, values: dict[str, Any]) -> Summarizer:
    model = values.pop("model")
    if config.provider == Provider.ANTHROPIC:
        return _anthropic(model or "", **values)
    if config.provider == Provider.OPENAI:
        # No key and no base URL: the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL.
        return OpenAISummarizer(model or "", **values)
    if config.provider != Provider.CUSTOM:
        raise ValueError(f"unknown provider {config.provider!r}")
    cls = load_summarizer_class(config.class_path.strip())
    made = cls(**constructor_kwargs(cls, {"model": model, **values}))
    if not isinstance(made, Summarizer):
        raise Unavailable(
            f"summarizer configuration {config.name!r}: {config.class_path} made a "
            f"{type(made).__name__}, not a summarizer (summarize(request) and name)"
        )
    return made


def _api_key(config: SummarizerConfig) -> str | None:
    """The key in the environment variable the configuration names, read now.

    None when it names none (the provider's defaults apply). Unavailable when the variable
    is not one meant for summary keys (`key_env_allowed`: a row written before the rule or
    around the admin must not hand out the app's secrets) or is unset or empty: the same
    sentence either way, so it tells nothing about which variables exist; never another
    key in its place.
    """
    name = config.api_key_env.strip()
    if not name:
        return None
    key = os.environ.get(name, "") if key_env_allowed(name) else ""
    if not key:
        logger.warning(
            "summarizer configuration %r: no allowed summary key in %s",
            config.name,
            name,
            extra={"summarizer_config": config.name, "allowed": key_env_allowed(name)},
        )
        raise Unavailable(
            f"summarizer configuration {config.name!r} cannot read its API key: {name} is "
            "not an allowed summary key variable set where this compaction runs "
            "(docs/summarizers.md#the-api-key)"
        )
    return key


def _setting(name: str) -> str | None:
    return str(getattr(settings, name, "") or "") or None
