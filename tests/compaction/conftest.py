"""Fixtures for the engine tests."""

from __future__ import annotations

import pytest

from tests.support.clock import FakeClock
from tests.support.fixtures import fake_anthropic, fake_openai

__all__ = ["clock", "fake_anthropic", "fake_openai"]


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at 2026-02-17T10:15:00Z whose sleeps are instant and recorded."""
    return FakeClock()
