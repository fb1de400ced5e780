"""services/sessions/threshold.py's answers for compaction ahead of time and overflow recovery
(issue 26 items 1 and 2): the `prepare` standing and the window learned from a refusal."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction import Policy
from sessions_app.services.sessions.policies import policy_for
from sessions_app.services.sessions.threshold import (
    MIN_LEARNED_WINDOW,
    session_standing,
    standing,
    usage_standing,
    window_after_overflow,
)

POLICY = Policy(context_limit=10_000, trigger_ratio=0.9)


@pytest.mark.parametrize(
    ("tokens", "prepare_at", "prepare", "over"),
    [
        (7_999, 0.8, False, False),
        (8_000, 0.8, True, False),  # exactly at the soft threshold prepares
        (9_000, 0.8, True, True),
        (8_500, None, False, False),  # no soft threshold: nothing prepared
        (8_999, 0.95, False, False),  # above the threshold: the threshold prepares
        (9_000, 0.95, True, True),
    ],
)
def test_prepare_is_past_the_soft_threshold_or_the_threshold(
    tokens: int, prepare_at: float | None, prepare: bool, over: bool
) -> None:
    place = standing(POLICY, tokens, prepare_at)
    assert (place.prepare, place.over_threshold) == (prepare, over)


def test_prepare_counts_as_the_engine_does() -> None:
    assert standing(POLICY.replace(safety_factor=2.0), 4_000, 0.8).prepare  # 8,000 scaled
    assert standing(POLICY.replace(reserved_tokens=3_000), 5_000, 0.8).prepare
    assert not standing(POLICY.replace(enabled=False), 9_500, 0.8).prepare
    # Reported usage holds the reserved tokens already.
    assert not usage_standing(POLICY.replace(reserved_tokens=3_000), 7_000, 0.8).prepare
    assert usage_standing(POLICY.replace(reserved_tokens=3_000), 8_000, 0.8).prepare


@pytest.mark.django_db
def test_a_sessions_standing_uses_its_profiles_prepare_at(
    make_session: Any, make_profile: Any
) -> None:
    profile = make_profile(trigger_ratio=0.9, prepare_at=0.5)
    session = make_session(profile=profile)
    session.context_limit = int(session.context_tokens / 0.6)
    assert session_standing(session, profile).prepare
    profile.prepare_at = None
    assert not session_standing(session, profile).prepare


def test_the_window_is_the_upstreams_limit_in_ctxwebs_tokens() -> None:
    # The upstream counted 250,000 of its tokens for our 200,000 and takes 200,000.
    assert window_after_overflow(200_000, 200_000, 250_000) == 160_000
    assert window_after_overflow(20_000, None, None) == 15_000  # no figures: three quarters
    assert window_after_overflow(20_000, 30_000, 25_000) == 15_000  # figures that say nothing


@given(
    sent=st.integers(min_value=0, max_value=10_000_000),
    limit=st.none() | st.integers(min_value=0, max_value=10_000_000),
    counted=st.none() | st.integers(min_value=0, max_value=10_000_000),
)
def test_the_window_is_always_below_what_was_refused(
    sent: int, limit: int | None, counted: int | None
) -> None:
    window = window_after_overflow(sent, limit, counted)
    assert window >= MIN_LEARNED_WINDOW
    if sent > MIN_LEARNED_WINDOW:
        assert window < sent


@pytest.mark.django_db
def test_the_learned_window_narrows_the_policy(make_session: Any, make_profile: Any) -> None:
    profile = make_profile(context_limit=100_000, trigger_ratio=0.9)
    session = make_session(profile=profile)
    assert policy_for(session, profile).context_limit == 100_000
    session.upstream_window = 40_000
    assert policy_for(session, profile).context_limit == 40_000
    assert policy_for(session, profile).threshold == 36_000
    session.context_limit = 30_000  # a smaller limit of the session's own stays
    assert policy_for(session, profile).context_limit == 30_000
