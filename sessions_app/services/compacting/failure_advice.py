"""A failed compaction in one sentence a person can act on: which summarizer configuration,
which host, and what to do (issue 29 item 2).

`failure_advice` reads the fields of the error record (services/compacting/failure_errors.py:
reason, status, retry_after), never its message; `summarizer_target` names the profile's
summarizer and the host it calls (docs/summarizers.md), read from the configuration without
building the summarizer, so a configuration that cannot be built is named all the same.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from django.conf import settings

from compaction import SUMMARY_FAILURES
from sessions_app.models import CompactionProfile, Session, SummarizerConfig
from sessions_app.services.sessions.policies import profile_for

__all__ = [
    "SETUP_FAILURE",
    "SummarizerTarget",
    "failure_advice",
    "summarizer_target",
    "with_advice",
]

#: The failure reason of a run whose summarizer could not be set up (no key, no SDK...).
SETUP_FAILURE: Final = "summarizer_unavailable"
#: Where the summary is made when no remote model is called.
LOCAL: Final = "this server"
_DEFAULT_HOSTS: Final = {"anthropic": "api.anthropic.com", "openai": "api.openai.com"}
_HTTP_TOO_MANY: Final = 429
_HTTP_SERVER: Final = 500
_KEY_REFUSED: Final = frozenset({401, 403})


@dataclass(frozen=True, slots=True)
class SummarizerTarget:
    """The summarizer a profile uses, as a person finds it in the admin, and its host."""

    label: str
    host: str


def _host(url: str, provider: str) -> str:
    if not url:
        return _DEFAULT_HOSTS.get(provider, LOCAL)
    parts = urlsplit(url if "//" in url else f"//{url}")
    return parts.netloc or url


def summarizer_target(profile: CompactionProfile | None) -> SummarizerTarget:
    """The summarizer `profile` uses (its configuration, else its own choice) and its host."""
    override = str(getattr(settings, "CTXWEB_SUMMARIZER_CLASS", "") or "")
    if override:
        return SummarizerTarget(f"the summarizer class {override}", LOCAL)
    if profile is None:
        return SummarizerTarget("the default profile's summarizer", LOCAL)
    config: SummarizerConfig | None = (
        profile.summarizer_config if profile.summarizer_config_id is not None else None
    )
    if config is not None:
        label = f"summarizer configuration {config.name!r}"
        if config.provider == SummarizerConfig.Provider.OPENAI:
            base = config.base_url.strip() or os.environ.get("OPENAI_BASE_URL", "")
            return SummarizerTarget(label, _host(base, "openai"))
        if config.provider == SummarizerConfig.Provider.ANTHROPIC:
            base = config.base_url.strip() or str(getattr(settings, "ANTHROPIC_BASE_URL", ""))
            return SummarizerTarget(label, _host(base, "anthropic"))
        return SummarizerTarget(label, _host(config.base_url.strip(), str(config.provider)))
    label = f"the summarizer of profile {profile.name!r}"
    if profile.summarizer == CompactionProfile.SummarizerKind.EXTRACTIVE:
        return SummarizerTarget(label, LOCAL)
    return SummarizerTarget(
        label, _host(str(getattr(settings, "ANTHROPIC_BASE_URL", "") or ""), "anthropic")
    )


def with_advice(
    record: Mapping[str, Any], session: Session, profile: str | None = None
) -> dict[str, Any]:
    """`record` (a failure_error record) with the advice for `session` run with `profile`
    (a name; None: the session's), as a failed row stores it; for a dry run's failure."""
    target = summarizer_target(profile_for(session, profile))
    return {**record, "advice": failure_advice(record, target)}


def failure_advice(record: Mapping[str, Any], target: SummarizerTarget) -> str:
    """One sentence for a failed attempt's error `record`: what failed, where, what to do."""
    reason = str(record.get("reason") or "")
    fixed = _NOT_THE_SUMMARIZER.get(reason)
    if fixed is not None:
        return fixed
    label, host = target.label, target.host
    if reason == SETUP_FAILURE:
        return (
            f"{label.capitalize()} could not be set up, so {host} was not called: set the "
            "variable it names for its API key where the worker runs (docs/summarizers.md"
            "#the-api-key), or choose another summarizer for the profile in the admin."
        )
    status = record.get("status")
    if isinstance(status, int):
        return _http_advice(status, record.get("retry_after"), target)
    if reason == "api_error":
        return (
            f"{label.capitalize()} could not connect to {host}: check that {host} is "
            "reachable from this server and that the configuration's base URL is right, "
            "then compact again."
        )
    default = _OTHER_ADVICE if reason in SUMMARY_FAILURES else _NOT_APPLIED
    # _SUMMARY_ADVICE also holds the reasons a check of the result gives (no_savings...).
    return _SUMMARY_ADVICE.get(reason, default).format(
        label=label, host=host, reason=reason, Label=label.capitalize()
    )


def _http_advice(status: int, retry_after: Any, target: SummarizerTarget) -> str:
    label, host = target.label, target.host
    if status in _KEY_REFUSED:
        return (
            f"{host} refused the API key of {label} (HTTP {status}): set a valid key where "
            "the worker runs, then compact again."
        )
    if status == _HTTP_TOO_MANY:
        wait = f"in {round(retry_after)} s" if isinstance(retry_after, int | float) else "later"
        return f"{host} is limiting the requests of {label} (HTTP 429): compact again {wait}."
    if status >= _HTTP_SERVER:
        return (
            f"{host} failed to answer {label} (HTTP {status}): the service is down or "
            "overloaded; compact again later."
        )
    return (
        f"{host} refused the request of {label} (HTTP {status}): check its model name and "
        "settings in the admin, then compact again."
    )


_NOT_THE_SUMMARIZER: Final = {
    "archive_error": (
        "The archive of the replaced messages could not be written: check the storage "
        "(CTXWEB_STORAGE_BACKEND, free space); the session is unchanged, compact again."
    ),
    "database_error": (
        "The database failed while the compaction was saved; the session is unchanged: "
        "compact again."
    ),
    "conflict": (
        "Another change to the same messages was saved first; the session is unchanged: "
        "compact again."
    ),
}
_SUMMARY_ADVICE: Final = {
    "timeout": (
        "{host} did not answer {label} in time: compact again later, or raise the "
        "configuration's timeout in the admin."
    ),
    "refusal": (
        "The model at {host} ({label}) refused to summarize this conversation: compact "
        "again with other instructions, or choose another model."
    ),
    "no_savings": (
        "The result would not have been smaller than the context ({reason}); the session is "
        "unchanged: lower the profile's summary max tokens or keep fewer recent messages, "
        "or compact once more messages have come."
    ),
    "low_recall": (
        "The summary of {label} kept too few of the originals' identifiers ({reason}): "
        "lower the profile's minimum recall, or choose a stronger model."
    ),
    "context_exceeded": (
        "The request was larger than the model at {host} accepts ({label}): lower the "
        "profile's summary input limit in the admin, then compact again."
    ),
}
_OTHER_ADVICE: Final = (
    "{Label} at {host} gave no usable summary ({reason}): compact again, or choose another "
    "model or summarizer for the profile in the admin."
)
#: A reason that is no summary failure: a check of the run refused its result.
_NOT_APPLIED: Final = (
    "The compaction was not applied ({reason}); the session is unchanged: compact again, "
    "or change the profile's settings in the admin."
)
