"""Compaction profiles: the named settings a session or a compaction request can pick."""

from __future__ import annotations

from sessions_app.models import CompactionProfile

__all__ = ["profile_exists", "profiles", "profiles_by_id"]


def profiles() -> list[CompactionProfile]:
    """Every stored profile, by name."""
    return list(CompactionProfile.objects.order_by("name"))


def profiles_by_id() -> dict[int, CompactionProfile]:
    """Every stored profile by primary key (one query for a whole page of sessions)."""
    return {p.pk: p for p in CompactionProfile.objects.all()}


def profile_exists(name: str) -> bool:
    """True when a profile is stored under `name`."""
    return CompactionProfile.objects.filter(name=name).exists()
