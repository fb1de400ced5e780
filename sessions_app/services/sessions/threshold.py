"""The one answer to "is this session over its threshold, or its hard limit?".

`standing` is the only place the web app asks the engine's `Policy.over_threshold` and
`Policy.over_hard_limit`: the pre-call check (`services.context.runtime.check`, `prepare_context`),
the post-call usage check (`services.compacting.auto`), the proxy's checks
(`services.proxying.turns`), the
API's session answer and the page's gauge all take their answer from it, so the page says
"over the threshold" exactly when the engine would compact: the profile's `enabled` and
`safety_factor` and a proxied session's reserved system prompt and tools included
(docs/behaviour.md#pre-call-check, #reserved-tokens).
`tests/sessions_app/services/test_threshold.py` walks sessions_app/ for any other comparison
against a threshold or a limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from compaction import Policy
from sessions_app.models import CompactionProfile, Session
from sessions_app.services.errors import InvalidInput
from sessions_app.services.sessions.overhead import session_overhead
from sessions_app.services.sessions.policies import default_profile, policy_for

__all__ = [
    "Standing",
    "StandingResolver",
    "reserved_over_threshold",
    "session_standing",
    "shown_standing",
    "standing",
    "usage_over_threshold",
]


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a session's context stands against its policy's threshold and hard limit."""

    #: The context's tokens with the reserved ones (what goes upstream with every call).
    tokens: int
    context_limit: int
    trigger_ratio: float
    #: The threshold in tokens (`Policy.threshold`) and the hard limit in force.
    threshold: int
    hard_limit: int
    #: True when the next pre-call check compacts: the policy is enabled and its scaled
    #: count (safety factor) reaches the threshold.
    over_threshold: bool
    #: True when the context passes the hard limit (checked enabled or not).
    over_hard_limit: bool
    profile: str

    @property
    def usage(self) -> float | None:
        """`tokens` as a fraction of the context limit (None without a limit)."""
        return round(self.tokens / self.context_limit, 6) if self.context_limit else None


def standing(policy: Policy, context_tokens: int) -> Standing:
    """Where `context_tokens` of stored context stand under `policy`, whose
    `reserved_tokens` (a proxied session's system prompt and tools) count with them."""
    return Standing(
        tokens=context_tokens + policy.reserved_tokens,
        context_limit=policy.context_limit,
        trigger_ratio=policy.trigger_ratio,
        threshold=policy.threshold,
        hard_limit=policy.effective_hard_limit,
        over_threshold=policy.enabled and policy.over_threshold(context_tokens),
        over_hard_limit=policy.over_hard_limit(context_tokens),
        profile=policy.name,
    )


def usage_over_threshold(policy: Policy, reported_tokens: int) -> bool:
    """True when a model's reported usage reaches the threshold (docs/behaviour.md#post-call-check).

    The model counted the system prompt and tools itself, so the reserved tokens are not
    added again."""
    return standing(policy, reported_tokens - policy.reserved_tokens).over_threshold


def reserved_over_threshold(policy: Policy) -> bool:
    """True when the reserved tokens alone reach the threshold: no compaction could bring a
    call under it (the engine's `reserved_over_threshold` skip)."""
    return standing(policy, 0).over_threshold


def session_standing(
    session: Session,
    profile: CompactionProfile | None = None,
    *,
    counts: tuple[int, int] | None = None,
) -> Standing:
    """The standing of a stored session under `profile` (default: the session's).

    `counts`: its (context tokens, reserved tokens) read fresh from the row; default the
    loaded session's. A stored profile the engine refuses is an InvalidInput (policy_for).
    """
    policy = policy_for(session, profile)
    if counts is None:
        return standing(policy, session.context_tokens)
    tokens, reserved = counts
    if reserved != policy.reserved_tokens:
        policy = policy.replace(reserved_tokens=reserved)
    return standing(policy, tokens)


def shown_standing(session: Session, profile: CompactionProfile | None = None) -> Standing:
    """The standing a page or the API shows: `session_standing` with the session's loaded
    profile (else the default one). A profile the engine refuses (written around the
    admin's checks) still shows its limit and threshold, never over: the engine would not run.
    """
    profile = profile or (session.profile if session.profile_id is not None else None)
    profile = profile or default_profile()
    try:
        return session_standing(session, profile)
    except InvalidInput:
        limit = session.context_limit or profile.context_limit or Policy().context_limit
        return Standing(
            tokens=session.context_tokens + session_overhead(session).total,
            context_limit=limit,
            trigger_ratio=profile.trigger_ratio,
            threshold=int(limit * profile.trigger_ratio),
            hard_limit=limit,
            over_threshold=False,
            over_hard_limit=False,
            profile=profile.name,
        )


class StandingResolver:
    """`shown_standing` for many sessions (a page of them), the default profile read once."""

    @cached_property
    def default_profile(self) -> CompactionProfile:
        """The profile of a session that names none (maybe unsaved, with Policy defaults)."""
        return default_profile()

    def __call__(self, session: Session) -> Standing:
        """The session's standing under its loaded profile, else the default one."""
        profile = session.profile if session.profile_id is not None else None
        return shown_standing(session, profile or self.default_profile)
