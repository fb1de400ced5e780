"""Which profile, policy and summarizer a session uses, read fresh on every call (REQ-3.5)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils.module_loading import import_string

from compaction import AnthropicSummarizer, ExtractiveSummarizer, Policy, PolicyError, Summarizer

from ..models import CompactionProfile, Session

__all__ = ["default_profile", "policy_for", "profile_for", "summarizer_for"]

logger = logging.getLogger("sessions_app")


def default_profile() -> CompactionProfile:
    """The profile marked default, else `balanced`, else an unsaved one with Policy defaults."""
    profile = (
        CompactionProfile.objects.filter(is_default=True).order_by("name").first()
        or CompactionProfile.objects.filter(name="balanced").first()
    )
    return profile or CompactionProfile(name="balanced")


def profile_for(session: Session | None, name: str | None = None) -> CompactionProfile:
    """The profile named `name`, else the session's, else the default; always a fresh read.

    An unknown name is a PolicyError on the field `profile` (a 422 in the API).
    """
    if name:
        profile = CompactionProfile.objects.filter(name=name).first()
        if profile is None:
            known = ", ".join(CompactionProfile.objects.values_list("name", flat=True))
            raise PolicyError("profile", f"unknown profile {name!r}; known: {known}")
        return profile
    if session is not None and session.profile_id is not None:
        profile = CompactionProfile.objects.filter(pk=session.profile_id).first()
        if profile is not None:
            return profile
    return default_profile()


def policy_for(session: Session | None, profile: CompactionProfile | None = None) -> Policy:
    """The engine Policy of `profile` (default: the session's), with the session's limit."""
    profile = profile or profile_for(session)
    limit = session.context_limit if session is not None else None
    return profile.to_policy(context_limit=limit)


def summary_model(profile: CompactionProfile) -> str:
    """The summary model: the profile's, else settings.CTXWEB_SUMMARY_MODEL."""
    return profile.summary_model or str(getattr(settings, "CTXWEB_SUMMARY_MODEL", "") or "")


def summarizer_for(profile: CompactionProfile) -> Summarizer:
    """The summarizer a profile asks for.

    `auto`: AnthropicSummarizer when an API key and a model are configured, else
    ExtractiveSummarizer. settings.CTXWEB_SUMMARIZER_CLASS (the dotted path of a class or function
    taking the profile and returning a Summarizer) overrides everything: plug-ins and test
    fakes use it.
    """
    override = str(getattr(settings, "CTXWEB_SUMMARIZER_CLASS", "") or "")
    if override:
        factory = import_string(override)
        summarizer: Summarizer = factory(profile)
        return summarizer
    kind = profile.summarizer
    model = summary_model(profile)
    api_key = str(getattr(settings, "ANTHROPIC_API_KEY", "") or "")
    if kind == CompactionProfile.SummarizerKind.ANTHROPIC and not model:
        raise PolicyError("summary_model", "the anthropic summarizer needs a summary model")
    if kind == CompactionProfile.SummarizerKind.ANTHROPIC or (
        kind == CompactionProfile.SummarizerKind.AUTO and api_key and model
    ):
        return AnthropicSummarizer(
            model,
            max_tokens=profile.summary_max_tokens,
            timeout=profile.summary_timeout_seconds,
            api_key=api_key or None,
            base_url=str(getattr(settings, "ANTHROPIC_BASE_URL", "") or "") or None,
        )
    return _extractive(profile)


def _extractive(profile: CompactionProfile) -> Summarizer:
    summarizer: Summarizer = ExtractiveSummarizer()
    return summarizer
