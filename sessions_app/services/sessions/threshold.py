"""The one answer to "is this session over its threshold, or its hard limit?".

`standing` is the only place the web app asks the engine's `Policy.over_threshold` and
`Policy.over_hard_limit` (and, for the profile's soft threshold `prepare_at`, past which a
compaction is prepared in the background: docs/behaviour.md#prepared-compaction): the
pre-call check (`services.context.runtime.check`, `prepare_context`),
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
from sessions_app.services.sessions.policies import default_profile, policy_for, profile_for

__all__ = [
    "MIN_LEARNED_WINDOW",
    "Standing",
    "StandingResolver",
    "reserved_over_threshold",
    "session_standing",
    "shown_standing",
    "standing",
    "usage_over_threshold",
    "usage_standing",
    "window_after_overflow",
]

#: The smallest window learned from an upstream's refusal (tokens): below it no profile's
#: policy is valid, and no real model has one.
MIN_LEARNED_WINDOW = 1000


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
    #: True when a compaction is to be prepared ahead of time: the profile has a soft
    #: threshold (`prepare_at`), the policy is enabled and the scaled count reaches it, or
    #: the threshold itself when that is lower (docs/behaviour.md#prepared-compaction).
    prepare: bool = False

    @property
    def usage(self) -> float | None:
        """`tokens` as a fraction of the context limit (None without a limit)."""
        return round(self.tokens / self.context_limit, 6) if self.context_limit else None


def standing(policy: Policy, context_tokens: int, prepare_at: float | None = None) -> Standing:
    """Where `context_tokens` of stored context stand under `policy`, whose
    `reserved_tokens` (a proxied session's system prompt and tools) count with them;
    `prepare_at`: the profile's soft threshold (a share of the context limit), if any."""
    soft = None
    if prepare_at is not None:
        soft = policy.replace(trigger_ratio=min(max(prepare_at, 0.01), policy.trigger_ratio))
    return Standing(
        tokens=context_tokens + policy.reserved_tokens,
        context_limit=policy.context_limit,
        trigger_ratio=policy.trigger_ratio,
        threshold=policy.threshold,
        hard_limit=policy.effective_hard_limit,
        over_threshold=policy.enabled and policy.over_threshold(context_tokens),
        over_hard_limit=policy.over_hard_limit(context_tokens),
        profile=policy.name,
        prepare=soft is not None and policy.enabled and soft.over_threshold(context_tokens),
    )


def usage_over_threshold(policy: Policy, reported_tokens: int) -> bool:
    """True when a model's reported usage reaches the threshold (docs/behaviour.md#post-call-check).

    The model counted the system prompt and tools itself, so the reserved tokens are not
    added again."""
    return standing(policy, reported_tokens - policy.reserved_tokens).over_threshold


def usage_standing(policy: Policy, reported_tokens: int, prepare_at: float | None) -> Standing:
    """The standing of a model's reported usage, with the profile's soft threshold
    (`usage_over_threshold`'s answer is its `over_threshold`)."""
    return standing(policy, reported_tokens - policy.reserved_tokens, prepare_at)


def window_after_overflow(sent: int, limit: int | None, counted: int | None) -> int:
    """The window (in ctxweb's tokens) of an upstream that refused `sent` tokens as too long,
    naming its `limit` and its own count of the request, `counted`, when it said them
    (docs/behaviour.md#overflow-recovery). The upstream's tokenizer is not ctxweb's: its limit
    is scaled by how its count compares with ours. Without both figures, three quarters of
    what was refused. Always below `sent`, never under MIN_LEARNED_WINDOW."""
    scaled = bool(limit and counted and counted > limit)
    window = sent * (limit or 0) // (counted or 1) if scaled else sent * 3 // 4
    return max(min(window, sent - 1), MIN_LEARNED_WINDOW)


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
    profile = profile or profile_for(session)
    policy = policy_for(session, profile)
    if counts is None:
        return standing(policy, session.context_tokens, profile.prepare_at)
    tokens, reserved = counts
    if reserved != policy.reserved_tokens:
        policy = policy.replace(reserved_tokens=reserved)
    return standing(policy, tokens, profile.prepare_at)


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
