"""Policy: the seeds' defaults, validation, presets, round trips."""

from __future__ import annotations

import json

import pytest

from compaction import PRESETS, STEPS, Policy, PolicyError


def test_defaults_are_the_seeds():
    policy = Policy()

    assert policy.name == "balanced"
    assert policy.encoding == "o200k_base"
    assert policy.trigger_ratio == 0.92  # docs/behaviour.md#defaults
    assert policy.keep_recent_messages == 10  # docs/behaviour.md#defaults
    assert policy.summary_max_tokens == 1000  # docs/behaviour.md#defaults
    assert policy.max_retries == 2  # docs/behaviour.md#defaults
    assert policy.summary_timeout_seconds == 30.0  # docs/behaviour.md#defaults
    # docs/behaviour.md#defaults
    assert (policy.tool_blocks_keep_recent, policy.tool_call_threshold) == (5, 500)
    assert (policy.tool_result_threshold, policy.preview_tokens) == (600, 200)
    assert (policy.dialogue_rounds_keep_min, policy.cooldown_seconds) == (12, 8.0)
    assert policy.fold_max_tokens == 10_000  # docs/behaviour.md#defaults
    assert policy.smart_truncate_max_tokens == 50_000
    assert policy.offload_min_chars == 100  # docs/behaviour.md#defaults
    assert policy.steps == ("selective", "summary", "smart_truncate", "hard_truncate")


def test_derived_values():
    policy = Policy(context_limit=1000, trigger_ratio=0.8, tail_retention_ratio=0.25)

    assert policy.threshold == 800
    assert policy.tail_retention_tokens == 250
    assert policy.effective_hard_limit == 1000
    assert policy.replace(hard_limit=900).effective_hard_limit == 900
    assert policy.replace(safety_factor=1.5).scaled(100) == 150


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"trigger_ratio": 0}, "trigger_ratio"),
        ({"trigger_ratio": 1.5}, "trigger_ratio"),
        ({"tail_retention_ratio": -0.1}, "tail_retention_ratio"),
        ({"tail_retention_ratio": 1.5}, "tail_retention_ratio"),
        ({"min_recall": -0.1}, "min_recall"),
        ({"middle_start": 0.9, "middle_end": 0.5}, "middle_start"),
        ({"safety_factor": 0}, "safety_factor"),
        ({"keep_recent_messages": -1}, "keep_recent_messages"),
        ({"max_retries": -1}, "max_retries"),
        ({"context_limit": 0}, "context_limit"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"hard_limit": 10}, "hard_limit"),
        ({"steps": ("summary", "magic")}, "steps"),
    ],
)
def test_invalid_values_name_their_field(changes, field):
    with pytest.raises(PolicyError) as caught:
        Policy(**changes)

    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}:")


def test_zero_retries_and_zero_recall_are_allowed():
    assert Policy(max_retries=0, min_recall=0).max_retries == 0


def test_replace_validates_again():
    with pytest.raises(PolicyError):
        Policy().replace(trigger_ratio=2)


def test_is_frozen():
    with pytest.raises(AttributeError):
        Policy().context_limit = 5  # type: ignore[misc]


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_and_names_known_steps(name):
    policy = Policy.preset(name)

    assert policy.name == name
    assert set(policy.steps) <= set(STEPS)


def test_preset_values_and_overrides():
    assert Policy.preset("auto-compression").trigger_ratio == 0.80
    assert Policy.preset("auto-compression").steps == ("summary", "hard_truncate")
    assert Policy.preset("selective", cooldown_seconds=3).cooldown_seconds == 3
    assert Policy.preset("smart-truncation").safety_factor == 1.5


def test_a_zero_tail_ratio_means_no_token_budget():
    policy = Policy(tail_retention_ratio=0)

    assert policy.tail_retention_tokens == 0
    # The runtime context keeps exactly the newest 10 messages
    # (docs/behaviour.md#trigger-and-partition).
    auto = Policy.preset("auto-compression")
    assert (auto.tail_retention_ratio, auto.keep_recent_messages) == (0, 10)


def test_unknown_preset():
    with pytest.raises(PolicyError, match="unknown preset 'nope'"):
        Policy.preset("nope")


def test_dict_round_trip():
    policy = Policy.preset("selective", context_limit=123_456)

    assert Policy.from_dict(policy.to_dict()) == policy
    assert policy.to_dict()["steps"] == ["selective", "summary"]


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(PolicyError) as caught:
        Policy.from_dict({"context_limit": 10, "bogus": 1})

    assert caught.value.field == "bogus"


# --- bounds (issue 10): no setting may make a compaction run away ----------------------------

NUMBER_FIELDS = [
    "context_limit",
    "trigger_ratio",
    "safety_factor",
    "tail_retention_ratio",
    "keep_recent_messages",
    "summary_max_tokens",
    "max_retries",
    "retry_backoff_seconds",
    "summary_timeout_seconds",
    "summary_time_budget_seconds",
    "tool_blocks_keep_recent",
    "tool_call_threshold",
    "tool_result_threshold",
    "preview_tokens",
    "dialogue_rounds_keep_min",
    "cooldown_seconds",
    "fold_max_tokens",
    "fold_max_line_span",
    "fold_seed",
    "smart_truncate_max_tokens",
    "middle_start",
    "middle_end",
    "offload_min_chars",
    "min_recall",
    "hard_limit",
]


@pytest.mark.parametrize("field", NUMBER_FIELDS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 1e400, -1, 2**53])
def test_every_number_field_refuses_nan_infinity_huge_and_negative(field, value):
    with pytest.raises(PolicyError) as caught:
        Policy(**{field: value})

    assert caught.value.field == field


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (field, value)
        for field in NUMBER_FIELDS
        for value in ("3", True, None, [1])
        if (field, value) != ("hard_limit", None)  # None is its default: the context limit
    ],
)
def test_every_number_field_refuses_other_types(field, value):
    with pytest.raises(PolicyError) as caught:
        Policy(**{field: value})

    assert caught.value.field == field


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"steps": ("summary", "summary")}, "steps"),
        ({"steps": ("selective", "summary", "selective")}, "steps"),
        ({"max_retries": 11}, "max_retries"),
        ({"retry_backoff_seconds": 60.5}, "retry_backoff_seconds"),
        ({"retry_backoff_seconds": -0.1}, "retry_backoff_seconds"),
        ({"summary_time_budget_seconds": 0}, "summary_time_budget_seconds"),
        ({"summary_time_budget_seconds": 601}, "summary_time_budget_seconds"),
        ({"summary_timeout_seconds": 0}, "summary_timeout_seconds"),
        ({"context_limit": 2**53}, "context_limit"),
        ({"middle_end": 1.5}, "middle_end"),
        ({"keep_recent_messages": 2.5}, "keep_recent_messages"),
        ({"enabled": "yes"}, "enabled"),
        ({"encoding": "p50k_base"}, "encoding"),
        ({"file_view_tools": ("Read", 3)}, "file_view_tools"),
    ],
)
def test_bounds_name_their_field(changes, field):
    with pytest.raises(PolicyError) as caught:
        Policy(**changes)

    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}:")


def test_a_duplicate_step_is_named():
    with pytest.raises(
        PolicyError, match=r"steps: each step may appear once; repeated: \['summary'\]"
    ):
        Policy(steps=("summary", "hard_truncate", "summary"))


def test_the_largest_allowed_values_are_accepted():
    policy = Policy(
        context_limit=2**53 - 1,
        max_retries=10,
        retry_backoff_seconds=60,
        summary_time_budget_seconds=600,
    )

    assert (policy.max_retries, policy.retry_backoff_seconds) == (10, 60)
    assert policy.summary_time_budget_seconds == 600


def test_the_summary_time_budget_defaults_to_two_minutes():
    assert Policy().summary_time_budget_seconds == 120.0


def test_from_dict_refuses_json_overflow_and_non_lists():
    overflow = json.loads('{"retry_backoff_seconds": 1e400}')  # JSON parses it as inf
    with pytest.raises(PolicyError) as caught:
        Policy.from_dict(overflow)
    assert caught.value.field == "retry_backoff_seconds"
    with pytest.raises(PolicyError) as caught:
        Policy.from_dict({"steps": "summary"})
    assert caught.value.field == "steps"
