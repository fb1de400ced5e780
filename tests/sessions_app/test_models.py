"""Models: presets loaded by migration, profiles as policies, API key hashing."""

from __future__ import annotations

import pytest

from compaction import PRESETS, Policy, PolicyError
from sessions_app.models import ApiKey, CompactionProfile

pytestmark = pytest.mark.django_db


def test_every_preset_is_a_profile_and_balanced_is_the_default() -> None:
    names = set(CompactionProfile.objects.values_list("name", flat=True))
    assert set(PRESETS) <= names
    assert list(
        CompactionProfile.objects.filter(is_default=True).values_list("name", flat=True)
    ) == ["balanced"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_profile_is_the_preset_policy(name: str) -> None:
    profile = CompactionProfile.objects.get(name=name)
    assert profile.to_policy() == Policy.preset(name)


def test_to_policy_refuses_invalid_values() -> None:
    profile = CompactionProfile(name="bad", trigger_ratio=0)
    with pytest.raises(PolicyError):
        profile.to_policy()


def test_api_keys_are_hashed_and_parsed(user: object) -> None:
    row, key = ApiKey.issue(user, "k")
    assert key.startswith(f"ctx_{row.lookup}_")
    assert ApiKey.lookup_of(key) == row.lookup
    assert row.matches(key)
    assert not row.matches(key + "x")
    assert ApiKey.lookup_of("ctx_short_x") is None
    assert ApiKey.lookup_of("nope") is None
    assert row.is_active


@pytest.mark.django_db
def test_preset_descriptions_say_what_the_preset_does() -> None:
    from sessions_app.models import CompactionProfile

    descriptions = list(CompactionProfile.objects.values_list("description", flat=True))
    assert descriptions
    assert not [text for text in descriptions if "seed" in text.lower()]
