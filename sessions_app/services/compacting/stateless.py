"""Stateless compaction (`POST /api/compact`): messages in, the engine's result out, nothing
stored. The one place outside a stored session where the web app runs the engine, so the
router only translates HTTP (docs/architecture.md, "Layers")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction import (
    CompactionError,
    CompactOptions,
    CompactResult,
    Policy,
    PolicyError,
    compact_messages,
    count_tokens,
)
from sessions_app.services.context.runtime import system_text
from sessions_app.services.errors import InvalidInput, engine_error
from sessions_app.services.sessions.lifecycle import system_message
from sessions_app.services.sessions.policies import policy_for, profile_for, summarizer_for

__all__ = ["StatelessCompaction", "compact_stateless"]


@dataclass(frozen=True)
class StatelessCompaction:
    """One stateless run: the engine's result, its output split into a system text and the
    rest, and the token counts of the input and the output under the run's policy."""

    result: CompactResult
    system: str | None
    messages: list[dict[str, Any]]
    tokens_before: int
    tokens_after: int


def compact_stateless(
    messages: list[dict[str, Any]],
    *,
    system: Any = None,
    profile: str | None = None,
    policy: dict[str, Any] | None = None,
    instructions: str | None = None,
    force: bool = False,
) -> StatelessCompaction:
    """Compact `messages` (after an optional `system`) with a profile and policy overrides;
    an engine error becomes the service error standing for it (`engine_error`)."""
    chosen = profile_for(None, profile)
    run_policy = _policy(policy_for(None, chosen), policy)
    sent = list(messages)
    if system not in (None, ""):
        sent = [system_message(system), *sent]
    options = CompactOptions(
        summarizer=summarizer_for(chosen),
        instructions=instructions,
        force=force,
        trigger="api",
    )
    try:
        result = compact_messages(sent, run_policy, options=options)
    except CompactionError as error:  # invalid messages: each problem's path
        raise engine_error(error) from error
    head = 0
    while head < len(result.messages) and result.messages[head].get("role") == "system":
        head += 1
    return StatelessCompaction(
        result=result,
        system=system_text(result.messages[:head]),
        messages=result.messages[head:],
        tokens_before=count_tokens(sent, encoding=run_policy.encoding),
        tokens_after=count_tokens(result.messages, encoding=run_policy.encoding),
    )


def _policy(base: Policy, overrides: dict[str, Any] | None) -> Policy:
    """`base` with the caller's overrides; a bad field is a 422 naming `policy.<field>`,
    and so is one that would make the compaction dearer than the profile (`_no_dearer`)."""
    if not overrides:
        return base
    try:
        chosen = Policy.from_dict({**base.to_dict(), **overrides})
    except PolicyError as error:
        raise InvalidInput.field(f"policy.{error.field}", str(error).split(": ", 1)[-1]) from None
    except (TypeError, ValueError, ArithmeticError) as error:
        # A value of the wrong kind (a string, a list) that the policy's own checks did not
        # name: blame the one override that was given, or the policy as a whole.
        field = f"policy.{next(iter(overrides))}" if len(overrides) == 1 else "policy"
        raise InvalidInput.field(field, str(error) or type(error).__name__) from None
    _no_dearer(base, chosen)
    return chosen


def _no_dearer(base: Policy, chosen: Policy) -> None:
    """A 422 when the overrides allow more paid summary requests than the profile: a lower
    `summary_input_limit` (more, smaller parts) or a higher `max_summary_calls`
    (docs/behaviour.md#summary-call-limit)."""
    if chosen.summary_input_limit < base.summary_input_limit:
        raise InvalidInput.field(
            "policy.summary_input_limit",
            f"may not be lower than the profile's {base.summary_input_limit}: smaller "
            "requests mean more paid summary calls",
        )
    if chosen.max_summary_calls > base.max_summary_calls:
        raise InvalidInput.field(
            "policy.max_summary_calls",
            f"may not be higher than the profile's {base.max_summary_calls}",
        )
