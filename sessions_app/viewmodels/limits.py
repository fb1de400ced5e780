"""The context limit and compaction threshold a page draws for a session."""

from __future__ import annotations

from dataclasses import dataclass, field

from sessions_app.services.sessions.threshold import Standing

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Context limit, trigger ratio and profile of one session, with the threshold and
    whether the session is over it as the engine decides them (services/sessions/threshold.py):
    data the view hands over, never worked out here. Built with `Limits.of`."""

    context_limit: int
    trigger_ratio: float
    profile_name: str
    #: Token count at which compaction triggers (`Policy.threshold`).
    threshold: int = field(default=0, compare=False)
    #: True when the next pre-call check compacts (enabled, safety factor, reserved tokens).
    over_threshold: bool = field(default=False, compare=False)

    @classmethod
    def of(cls, standing: Standing) -> Limits:
        """The limits of the threshold service's answer for one session."""
        return cls(
            context_limit=standing.context_limit,
            trigger_ratio=standing.trigger_ratio,
            profile_name=standing.profile,
            threshold=standing.threshold,
            over_threshold=standing.over_threshold,
        )

    @property
    def token(self) -> str:
        """What a page drew of these limits, as its live poll carries it back: the poll
        answers with a fresh overview once it differs (an admin changed the profile)."""
        return f"{self.threshold}/{self.context_limit}/{self.trigger_ratio:g}/{self.profile_name}"

    def usage(self, tokens: int) -> float:
        """`tokens` as a fraction of the context limit (may exceed 1)."""
        return tokens / self.context_limit if self.context_limit else 0.0
