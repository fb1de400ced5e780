"""The usage a model reported for its last call, as a session keeps it in `last_usage`
(docs/behaviour.md, "Post-call check")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.utils import timezone

__all__ = ["reported_usage", "same_usage", "usage_tokens"]

_ANTHROPIC_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def usage_tokens(usage: Mapping[str, Any]) -> int:
    """Input plus output tokens of an Anthropic or OpenAI usage object (cache reads included)."""
    if any(key in usage for key in _ANTHROPIC_KEYS):
        return sum(int(usage.get(key) or 0) for key in _ANTHROPIC_KEYS)
    if "total_tokens" in usage:
        return int(usage.get("total_tokens") or 0)
    return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)


def reported_usage(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What `last_usage` becomes after `messages`: the `usage` of the last assistant message
    that has one, with its `total_tokens` and the time it was recorded; None when none has."""
    usage = None
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("usage"), Mapping):
            usage = message["usage"]
    if usage is None:
        return None
    return {**usage, "total_tokens": usage_tokens(usage), "at": timezone.now().isoformat()}


def same_usage(kept: Mapping[str, Any] | None, usage: Mapping[str, Any]) -> bool:
    """True when `kept` records the same report as `usage` (the time it was recorded aside)."""
    if kept is None:
        return False
    return {k: v for k, v in kept.items() if k != "at"} == {
        k: v for k, v in usage.items() if k != "at"
    }
