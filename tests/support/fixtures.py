"""Shared pytest fixtures. Register with `pytest_plugins = ["tests.support.fixtures"]`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_anthropic import FakeAnthropic

__all__ = ["fake_anthropic"]


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A running local fake of the Messages API (see tests/support/fake_anthropic.py)."""
    server = FakeAnthropic().start()
    try:
        yield server
    finally:
        server.stop()
