"""Policy: the seeds' defaults, validation, presets, round trips."""

from __future__ import annotations

import pytest

from compaction import PRESETS, STEPS, Policy, PolicyError


def test_defaults_are_the_seeds():
    policy = Policy()

    assert policy.name == "balanced"
    assert policy.encoding == "o200k_base"
    assert policy.trigger_ratio == 0.92  # seed 000
    assert policy.keep_recent_messages == 10  # seed 001
    assert policy.summary_max_tokens == 1000  # seed 001
    assert policy.max_retries == 2  # seed 000 F-007
    assert policy.summary_timeout_seconds == 30.0  # seed 001 §4.1
    assert (policy.tool_blocks_keep_recent, policy.tool_call_threshold) == (5, 500)  # seed 004
    assert (policy.tool_result_threshold, policy.preview_tokens) == (600, 200)
    assert (policy.dialogue_rounds_keep_min, policy.cooldown_seconds) == (12, 8.0)
    assert policy.fold_max_tokens == 10_000  # seed 002
    assert policy.smart_truncate_max_tokens == 50_000
    assert policy.offload_min_chars == 100  # seed 003
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
    # Seed 001 REQ-3.3: the runtime context keeps exactly the newest 10 messages.
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
