"""`Policy`: every threshold of the seeds as one frozen value, with named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .errors import PolicyError

__all__ = ["PRESETS", "STEPS", "Policy", "Step"]

Step = Literal["offload", "selective", "summary", "smart_truncate", "hard_truncate"]
#: Every step a preset's chain may name, in the order they run.
STEPS: Final[tuple[Step, ...]] = (
    "offload",
    "selective",
    "summary",
    "smart_truncate",
    "hard_truncate",
)

#: The smallest summary_input_limit: room for the prompt and a useful part of transcript.
MIN_SUMMARY_INPUT_LIMIT: Final = 2_000
MAX_SUMMARY_INPUT_LIMIT: Final = 10_000_000

DEFAULT_FILE_VIEW_TOOLS: Final = (
    "Read",
    "read_file",
    "view_file",
    "open_file",
    "str_replace_editor",
    "view",
    "cat",
)


@dataclass(frozen=True, kw_only=True)
class Policy:
    """Thresholds and switches for every strategy; defaults are the seeds' (preset balanced)."""

    name: str = "balanced"
    # Tokens and trigger (seed 000 F-001/F-002, 001 REQ-3.1, 002 §1 and §7.1).
    encoding: str = "o200k_base"
    context_limit: int = 200_000
    trigger_ratio: float = 0.92
    hard_limit: int | None = None  # None: the context limit itself
    safety_factor: float = 1.0
    enabled: bool = True
    # Partition (seed 000 F-003, 001 REQ-3.3). A tail_retention_ratio of 0 means no token
    # budget: the tail is exactly keep_recent_messages (moved earlier only for tool pairs).
    tail_retention_ratio: float = 0.2
    keep_recent_messages: int = 10
    # Summary (seed 000 F-004/F-007, 001 REQ-3.2).
    summary_max_tokens: int = 1000
    summary_model: str | None = None
    max_retries: int = 2
    retry_backoff_seconds: float = 1.0
    summary_timeout_seconds: float = 30.0
    # Tokens one summarizer request may carry (prompt and transcript); a larger middle is
    # summarized in parts, then the part summaries are merged (a 128k-token model's share).
    summary_input_limit: int = 100_000
    # Chain of steps compact_messages runs (see STEPS).
    steps: tuple[Step, ...] = ("selective", "summary", "smart_truncate", "hard_truncate")
    # Selective pruning and cooldown (seed 004).
    tool_blocks_keep_recent: int = 5
    tool_call_threshold: int = 500
    tool_result_threshold: int = 600
    preview_tokens: int = 200
    dialogue_rounds_keep_min: int = 12
    cooldown_seconds: float = 8.0
    # File folding (seed 002 §2, §4.3).
    fold_max_tokens: int = 10_000
    fold_merge_functions: bool = True
    fold_max_line_span: int = 100
    fold_seed: int = 0
    # Smart truncation (seed 002 §3, §4.3).
    smart_truncate_max_tokens: int = 50_000
    middle_start: float = 1 / 6
    middle_end: float = 5 / 6
    file_view_tools: tuple[str, ...] = field(default=DEFAULT_FILE_VIEW_TOOLS)
    # Offload (seed 003).
    offload_min_chars: int = 100
    # Retention check.
    min_recall: float = 0.8

    def __post_init__(self) -> None:
        _check_ratio("trigger_ratio", self.trigger_ratio)
        # 0: no token budget, the tail is exactly keep_recent_messages (seed 001 REQ-3.3).
        _check_ratio("tail_retention_ratio", self.tail_retention_ratio, allow_zero=True)
        _check_ratio("min_recall", self.min_recall, allow_zero=True)
        _check_ratio("middle_start", self.middle_start, allow_zero=True)
        _check_ratio("middle_end", self.middle_end)
        if self.middle_start >= self.middle_end:
            raise PolicyError("middle_start", "must be below middle_end")
        if self.safety_factor <= 0:
            raise PolicyError("safety_factor", "must be positive")
        for name in _NON_NEGATIVE_INTS:
            if getattr(self, name) < 0:
                raise PolicyError(name, "must not be negative")
        for name in _POSITIVE_INTS:
            if getattr(self, name) <= 0:
                raise PolicyError(name, "must be positive")
        if not MIN_SUMMARY_INPUT_LIMIT <= self.summary_input_limit <= MAX_SUMMARY_INPUT_LIMIT:
            raise PolicyError(
                "summary_input_limit",
                f"must be in [{MIN_SUMMARY_INPUT_LIMIT}, {MAX_SUMMARY_INPUT_LIMIT}] "
                f"(the prompt alone takes ~600), got {self.summary_input_limit}",
            )
        if self.hard_limit is not None and self.hard_limit < self.threshold:
            raise PolicyError("hard_limit", "must be at least the trigger threshold")
        unknown = [step for step in self.steps if step not in STEPS]
        if unknown:
            raise PolicyError("steps", f"unknown step(s) {unknown}; known: {list(STEPS)}")

    @property
    def threshold(self) -> int:
        """Token count at which compaction triggers: context_limit x trigger_ratio."""
        return int(self.context_limit * self.trigger_ratio)

    @property
    def effective_hard_limit(self) -> int:
        """The hard limit, which defaults to the context limit."""
        return self.hard_limit if self.hard_limit is not None else self.context_limit

    @property
    def tail_retention_tokens(self) -> int:
        """Token budget of the retained tail: context_limit x tail_retention_ratio."""
        return int(self.context_limit * self.tail_retention_ratio)

    def scaled(self, tokens: int) -> int:
        """A token count as used for decisions, scaled by the safety factor (seed 002 §7.1)."""
        return int(tokens * self.safety_factor)

    def replace(self, **changes: Any) -> Policy:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON-able values."""
        data = dataclasses.asdict(self)
        data["steps"] = list(self.steps)
        data["file_view_tools"] = list(self.file_view_tools)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policy:
        """A policy from `to_dict` output; unknown keys are a PolicyError naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise PolicyError(unknown[0], "is not a policy field")
        values = dict(data)
        for key in ("steps", "file_view_tools"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> Policy:
        """The named preset (see PRESETS), optionally with some fields overridden."""
        try:
            values = PRESETS[name]
        except KeyError:
            known = ", ".join(PRESETS)
            raise PolicyError("preset", f"unknown preset {name!r}; known: {known}") from None
        return cls(name=name, **{**values, **overrides})


def _check_ratio(name: str, value: float, *, allow_zero: bool = False) -> None:
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value <= 1):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise PolicyError(name, f"must be in {interval}, got {value}")


_NON_NEGATIVE_INTS: Final = (
    "keep_recent_messages",
    "max_retries",
    "tool_blocks_keep_recent",
    "dialogue_rounds_keep_min",
    "offload_min_chars",
    "fold_seed",
)
_POSITIVE_INTS: Final = (
    "context_limit",
    "summary_max_tokens",
    "tool_call_threshold",
    "tool_result_threshold",
    "preview_tokens",
    "fold_max_tokens",
    "fold_max_line_span",
    "smart_truncate_max_tokens",
)

#: The presets of DESIGN.md, as overrides of Policy's defaults.
PRESETS: Final[dict[str, dict[str, Any]]] = {
    "balanced": {},
    "context-compact": {
        "trigger_ratio": 0.92,
        "steps": ("summary",),
        "max_retries": 2,
    },
    "auto-compression": {
        "trigger_ratio": 0.80,
        # REQ-3.3: system prompt + summary + the newest 10 messages, by count alone.
        "tail_retention_ratio": 0.0,
        "keep_recent_messages": 10,
        "summary_max_tokens": 1000,
        "steps": ("summary", "hard_truncate"),
    },
    "selective": {
        "steps": ("selective", "summary"),
        "tool_blocks_keep_recent": 5,
        "tool_call_threshold": 500,
        "tool_result_threshold": 600,
        "preview_tokens": 200,
        "dialogue_rounds_keep_min": 12,
        "cooldown_seconds": 8.0,
    },
    "smart-truncation": {
        "steps": ("smart_truncate",),
        "fold_max_tokens": 10_000,
        "fold_merge_functions": True,
        "fold_max_line_span": 100,
        "smart_truncate_max_tokens": 50_000,
        "safety_factor": 1.5,
    },
    "offload": {
        "steps": ("offload",),
        "offload_min_chars": 100,
    },
}
