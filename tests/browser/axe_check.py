"""axe-core in the issue 29 tests of ui1 (place, numbers, phone): no serious or critical
finding on the page as the test left it. The script is the one tests/browser/test_axe.py
finds (`make axe-core`); it is evaluated through Playwright, which the page's CSP does not
stop (the page's own scripts stay under it)."""

from __future__ import annotations

from typing import Any

from .test_axe import BLOCKING, RUN_AXE, axe_script

__all__ = ["assert_axe_clean"]


def assert_axe_clean(page: Any) -> None:
    """Fail with axe's serious or critical findings on `page`, if any."""
    if not page.evaluate("() => Boolean(window.axe)"):
        page.evaluate(axe_script().read_text())
    found = page.evaluate(RUN_AXE, list(BLOCKING))
    assert found == [], found
