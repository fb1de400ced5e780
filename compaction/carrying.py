"""What the summary step adds to a summarizer's work: the session state of the middle and
its block, the narrative's share of the budget, and the grounding of the summarizer's text
(docs/behaviour.md#what-a-summary-always-keeps).

`StateCarrier.carry` builds the state of a run's middle (earlier summaries merged) and renders
its block within all of `summary_max_tokens` but the narrative's floor, so the narrative
shrinks first; `narrative_tokens` is what the summarizer may write beside it; `finish` ends
a summary with the block and gives the message's `state` key; `grounded` takes path
fragments out of the summarizer's text. A caller's own summary (`CallerSummary`) is used as
written: neither grounded nor given the block, its state still carried in the `state` key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .carried_state import CarriedState, expand_path_groups
from .grounding import Grounding
from .messages import Message
from .policy import Policy
from .results import Partition
from .state_block import render_state
from .state_builder import carried_state
from .summarizers.base import Summarizer
from .summarizers.caller import CallerSummary
from .tokens import count_text_tokens

__all__ = ["StateCarrier", "paths_written_out"]

#: The least a summarizer always has for its narrative: this share of the budget, and at
#: least `_NARRATIVE_MIN` tokens.
_NARRATIVE_SHARE: Final = 8
_NARRATIVE_MIN: Final = 64


@dataclass
class StateCarrier:
    """The state of one run's middle, its block and the whole paths of the middle."""

    policy: Policy
    summarizer: Summarizer
    state: CarriedState = field(default_factory=CarriedState)
    block: str = ""
    _grounding: dict[int, Grounding] = field(default_factory=dict, repr=False)

    @property
    def as_written(self) -> bool:
        """True for a caller's own summary (module doc)."""
        return isinstance(self.summarizer, CallerSummary)

    def carry(self, parts: Partition) -> str:
        """The block of the middle's state (earlier summaries merged), its tail marked."""
        self.state = carried_state(parts.middle).with_tail(parts.tail)
        budget = self.policy.summary_max_tokens
        self.block = render_state(self.state, budget - _floor(budget), self.policy.encoding)
        return self.block

    def narrative_tokens(self) -> int:
        """What the summarizer may write beside the block."""
        budget = self.policy.summary_max_tokens
        used = count_text_tokens(self.block, self.policy.encoding) + 2 if self.block else 0
        return max(budget - used, _floor(budget))

    def grounded(self, text: str, middle: Sequence[Message]) -> str:
        """The summarizer's text with no fragment of a path (`grounding`)."""
        if self.as_written:
            return text
        grounding = self._grounding.get(id(middle))
        if grounding is None or grounding.messages is not middle:
            grounding = self._grounding[id(middle)] = Grounding(middle)
        return grounding.ground(text)

    def finish(self, text: str) -> tuple[str, dict[str, Any]]:
        """The summary's text with the block, and the message's extra metadata."""
        if not self.block:
            return text, {}
        extra = {"state": self.state.as_json()}
        return (text if self.as_written else f"{text}\n\n{self.block}"), extra


def _floor(budget: int) -> int:
    return max(_NARRATIVE_MIN, budget // _NARRATIVE_SHARE)


def paths_written_out(message: Message) -> Message:
    """A summary message whose state block's brace groups are written out as whole paths,
    as recall looks for each path whole (`state_block.expand_path_groups`)."""
    content = message.get("content")
    if not isinstance(content, str) or "{" not in content:
        return message
    return {**message, "content": expand_path_groups(content)}
