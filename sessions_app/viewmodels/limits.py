"""The context limit and compaction threshold that apply to a session."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from compaction import Policy
from sessions_app.models import CompactionProfile, Session
from sessions_app.services import policies

__all__ = ["Limits", "LimitsResolver", "limits_for"]


@dataclass(frozen=True)
class Limits:
    """Context limit, trigger ratio and the threshold they make, for one session."""

    context_limit: int
    trigger_ratio: float
    profile_name: str

    @property
    def threshold(self) -> int:
        """Token count at which compaction triggers."""
        return int(self.context_limit * self.trigger_ratio)

    def usage(self, tokens: int) -> float:
        """`tokens` as a fraction of the context limit (may exceed 1)."""
        return tokens / self.context_limit if self.context_limit else 0.0


class LimitsResolver:
    """Limits for many sessions, looking the default profile up once."""

    @cached_property
    def default_profile(self) -> CompactionProfile:
        """The profile used when a session names none (maybe unsaved, with Policy defaults)."""
        return policies.default_profile()

    def __call__(self, session: Session) -> Limits:
        """The session's own context limit, else its profile's, else the default profile's."""
        profile = session.profile or self.default_profile
        limit = session.context_limit or profile.context_limit or Policy().context_limit
        return Limits(
            context_limit=limit, trigger_ratio=profile.trigger_ratio, profile_name=profile.name
        )


def limits_for(session: Session) -> Limits:
    """The limits of one session."""
    return LimitsResolver()(session)
