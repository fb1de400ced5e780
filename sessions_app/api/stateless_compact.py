"""`POST /api/compact`: stateless compaction, nothing stored; messages in, compacted messages out.

Not to be confused with `session_compactions` (compacting a stored session)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from compaction import (
    CompactionError,
    CompactOptions,
    Policy,
    PolicyError,
    compact_messages,
    count_tokens,
)

from ..services.context import system_text
from ..services.errors import InvalidInput, engine_error
from ..services.policies import policy_for, profile_for, summarizer_for
from ..services.sessions import system_message
from .common import errors
from .schemas import StatelessCompactIn, StatelessCompactOut
from .throttling import SummarizerThrottle

router = Router(tags=["compact"])


@router.post(
    "/compact",
    response={200: StatelessCompactOut, **errors(400, 403, 413, 422)},
    throttle=SummarizerThrottle("compact"),
)
def compact(request: HttpRequest, payload: StatelessCompactIn) -> dict[str, Any]:  # noqa: ARG001 (ninja)
    """Compact `messages` (after an optional `system`) with a profile and policy overrides."""
    profile = profile_for(None, payload.profile)
    policy = _policy(policy_for(None, profile), payload.policy)
    messages = list(payload.messages)
    if payload.system not in (None, ""):
        messages = [system_message(payload.system), *messages]
    options = CompactOptions(
        summarizer=summarizer_for(profile),
        instructions=payload.instructions,
        force=payload.force,
        trigger="api",
    )
    try:
        result = compact_messages(messages, policy, options=options)
    except CompactionError as error:  # invalid messages: each problem's path
        raise engine_error(error) from error
    head = 0
    while head < len(result.messages) and result.messages[head].get("role") == "system":
        head += 1
    return {
        "system": system_text(result.messages[:head]),
        "messages": result.messages[head:],
        "compacted": result.compacted,
        "reason": result.reason,
        "summary": result.summary,
        "summarizer": result.summarizer,
        "stats": result.stats.to_dict(),
        "tokens_before": count_tokens(messages, encoding=policy.encoding),
        "tokens_after": count_tokens(result.messages, encoding=policy.encoding),
        "events": [event.to_dict() for event in result.events],
        "steps": [
            {
                "step": r.step,
                "ran": r.ran,
                "changed": r.changed,
                "tokens_before": r.tokens_before,
                "tokens_after": r.tokens_after,
                "detail": dict(r.detail),
            }
            for r in result.steps
        ],
    }


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
