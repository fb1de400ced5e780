"""`Policy`: every threshold of the seeds as one frozen value, with named presets.

Every field is checked on creation (`replace` and `from_dict` included): a value of the wrong
type, NaN, an infinity or a number outside the field's bounds is a PolicyError naming the
field, so bad settings (profile overrides from the web app) are refused before any work,
and no setting can make a compaction run for hours (retries, backoff, the summary's time
budget) or count past what JSON numbers hold exactly (2**53).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .errors import PolicyError
from .tokens import ENCODINGS

__all__ = ["MAX_INT", "PRESETS", "STEPS", "Policy", "Step"]

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
#: The highest max_summary_calls a policy may set.
MAX_SUMMARY_CALLS: Final = 10_000

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
    # Tokens and trigger
    # (docs/behaviour.md#token-counting, #trigger-and-partition, #pre-call-check).
    encoding: str = "o200k_base"
    context_limit: int = 200_000
    trigger_ratio: float = 0.92
    hard_limit: int | None = None  # None: the context limit itself
    safety_factor: float = 1.0
    # Tokens sent with the messages on every call but not among them (a system prompt and
    # tool definitions kept apart): counted with the messages against the threshold and the
    # hard limit (docs/behaviour.md#reserved-tokens).
    reserved_tokens: int = 0
    enabled: bool = True
    # Partition (docs/behaviour.md#trigger-and-partition). A tail_retention_ratio of 0 means no
    # token budget: the tail is exactly keep_recent_messages (moved earlier only for tool pairs).
    tail_retention_ratio: float = 0.2
    keep_recent_messages: int = 10
    # Summary (docs/behaviour.md#summary, #retries).
    summary_max_tokens: int = 1000
    summary_model: str | None = None
    max_retries: int = 2  # at most 10
    retry_backoff_seconds: float = 1.0  # doubled per retry; at most 60
    summary_timeout_seconds: float = 30.0
    # Wall-clock budget of the whole summarizer phase (attempts, backoff, retention retry):
    # once spent, no further attempt starts and the compaction fails with `time_budget`.
    summary_time_budget_seconds: float = 120.0
    # Tokens one summarizer request may carry (prompt and transcript); a larger middle is
    # summarized in parts, then the part summaries are merged (a 128k-token model's share).
    summary_input_limit: int = 100_000
    # Summarizer requests one compaction may make (parts, merges, the final request and the
    # retention check's second request; an attempt's retries are not counted): a middle
    # needing more is refused with `too_many_summary_calls` before any request is sent
    # (docs/behaviour.md#summary-call-limit).
    max_summary_calls: int = 32
    # Chain of steps compact_messages runs (see STEPS).
    steps: tuple[Step, ...] = ("selective", "summary", "smart_truncate", "hard_truncate")
    # Selective pruning and cooldown (docs/behaviour.md#selective-pruning, #cooldown).
    tool_blocks_keep_recent: int = 5
    tool_call_threshold: int = 500
    tool_result_threshold: int = 600
    preview_tokens: int = 200
    dialogue_rounds_keep_min: int = 12
    cooldown_seconds: float = 8.0
    # File folding (docs/behaviour.md#file-outlines, #defaults).
    fold_max_tokens: int = 10_000
    fold_merge_functions: bool = True
    fold_max_line_span: int = 100
    fold_seed: int = 0
    # Smart truncation (docs/behaviour.md#smart-truncation, #defaults).
    smart_truncate_max_tokens: int = 50_000
    middle_start: float = 1 / 6
    middle_end: float = 5 / 6
    file_view_tools: tuple[str, ...] = field(default=DEFAULT_FILE_VIEW_TOOLS)
    # Offload (docs/behaviour.md#offloading).
    offload_min_chars: int = 100
    # Retention check.
    min_recall: float = 0.8

    def __post_init__(self) -> None:
        for name, (low, high) in _INT_BOUNDS.items():
            _check_int(name, getattr(self, name), low, high)
        for name, (least, most, open_low) in _FLOAT_BOUNDS.items():
            _check_float(name, getattr(self, name), least, most, open_low=open_low)
        for name in ("enabled", "fold_merge_functions"):
            if not isinstance(getattr(self, name), bool):
                raise PolicyError(name, "must be true or false")
        self._check_texts()
        if self.middle_start >= self.middle_end:
            raise PolicyError("middle_start", "must be below middle_end")
        if self.hard_limit is not None:
            _check_int("hard_limit", self.hard_limit, 1, MAX_INT)
            if self.hard_limit < self.threshold:
                raise PolicyError("hard_limit", "must be at least the trigger threshold")
        self._check_steps()

    def _check_texts(self) -> None:
        for name in ("name", "encoding"):
            if not isinstance(getattr(self, name), str):
                raise PolicyError(name, "must be a string")
        if self.encoding not in ENCODINGS:
            known = ", ".join(sorted(ENCODINGS))
            raise PolicyError("encoding", f"unknown encoding {self.encoding!r}; known: {known}")
        if self.summary_model is not None and not isinstance(self.summary_model, str):
            raise PolicyError("summary_model", "must be a string or null")
        tools = self.file_view_tools
        if not isinstance(tools, tuple) or not all(isinstance(t, str) for t in tools):
            raise PolicyError("file_view_tools", "must be a list of tool names")

    def _check_steps(self) -> None:
        if not isinstance(self.steps, tuple):
            raise PolicyError("steps", "must be a list of step names")
        unknown = [step for step in self.steps if step not in STEPS]
        if unknown:
            raise PolicyError("steps", f"unknown step(s) {unknown}; known: {list(STEPS)}")
        repeated = sorted({step for step in self.steps if self.steps.count(step) > 1})
        if repeated:
            raise PolicyError("steps", f"each step may appear once; repeated: {repeated}")

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

    def over_threshold(self, tokens: int) -> bool:
        """True when `tokens` of messages, with the reserved tokens, reach the threshold."""
        return self.scaled(tokens + self.reserved_tokens) >= self.threshold

    def over_hard_limit(self, tokens: int) -> bool:
        """True when `tokens` of messages, with the reserved tokens, pass the hard limit."""
        return self.scaled(tokens + self.reserved_tokens) > self.effective_hard_limit

    def scaled(self, tokens: int) -> int:
        """A token count as used for decisions, scaled by the safety factor
        (docs/behaviour.md#token-counting)."""
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
                if not isinstance(values[key], list | tuple):
                    raise PolicyError(key, "must be a list")
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


#: The largest integer setting: JSON numbers (the web API's) hold integers exactly up to it.
MAX_INT: Final = 2**53 - 1

#: Integer fields: (lowest, highest) allowed value.
_INT_BOUNDS: Final[dict[str, tuple[int, int]]] = {
    "context_limit": (1, MAX_INT),
    "reserved_tokens": (0, MAX_INT),
    "keep_recent_messages": (0, MAX_INT),
    "summary_max_tokens": (1, MAX_INT),
    "max_retries": (0, 10),
    "tool_blocks_keep_recent": (0, MAX_INT),
    "tool_call_threshold": (1, MAX_INT),
    "tool_result_threshold": (1, MAX_INT),
    "preview_tokens": (1, MAX_INT),
    "dialogue_rounds_keep_min": (0, MAX_INT),
    "fold_max_tokens": (1, MAX_INT),
    "fold_max_line_span": (1, MAX_INT),
    "fold_seed": (0, MAX_INT),
    "smart_truncate_max_tokens": (1, MAX_INT),
    "offload_min_chars": (0, MAX_INT),
    # Room for the prompt (~600 tokens) and a useful part of transcript.
    "summary_input_limit": (MIN_SUMMARY_INPUT_LIMIT, MAX_SUMMARY_INPUT_LIMIT),
    # At least one request (a middle that fits); at most a bound on the cost of a run.
    "max_summary_calls": (1, MAX_SUMMARY_CALLS),
}
#: Number fields: (lowest, highest, whether the lowest itself is excluded).
_FLOAT_BOUNDS: Final[dict[str, tuple[float, float, bool]]] = {
    "trigger_ratio": (0.0, 1.0, True),
    # 0: no token budget, the tail is exactly keep_recent_messages
    # (docs/behaviour.md#trigger-and-partition).
    "tail_retention_ratio": (0.0, 1.0, False),
    "min_recall": (0.0, 1.0, False),
    "middle_start": (0.0, 1.0, False),
    "middle_end": (0.0, 1.0, True),
    "safety_factor": (0.0, 100.0, True),
    "retry_backoff_seconds": (0.0, 60.0, False),
    "summary_timeout_seconds": (0.0, 600.0, True),
    "summary_time_budget_seconds": (0.0, 600.0, True),
    "cooldown_seconds": (0.0, 86_400.0, False),
}


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(name, f"must be an integer, got {value!r}")
    if not low <= value <= high:
        raise PolicyError(name, f"must be in [{low}, {high}], got {value}")


def _check_float(name: str, value: Any, low: float, high: float, *, open_low: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(name, f"must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise PolicyError(name, f"must be a finite number, got {value}")
    if not (low < value if open_low else low <= value) or value > high:
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise PolicyError(name, f"must be in {interval}, got {value}")


#: The presets (docs/behaviour.md#presets), as overrides of Policy's defaults.
PRESETS: Final[dict[str, dict[str, Any]]] = {
    "balanced": {},
    "context-compact": {
        "trigger_ratio": 0.92,
        "steps": ("summary",),
        "max_retries": 2,
    },
    "auto-compression": {
        "trigger_ratio": 0.80,
        # System prompt + summary + the newest 10 messages, by count alone
        # (docs/behaviour.md#trigger-and-partition).
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
