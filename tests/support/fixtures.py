"""Shared pytest fixtures. Register with `pytest_plugins = ["tests.support.fixtures"]`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI

__all__ = ["fake_anthropic", "fake_openai"]


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A running local fake of the Messages API (see tests/support/fake_anthropic.py)."""
    server = FakeAnthropic().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running local fake of Chat Completions (see tests/support/fake_openai.py)."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
