from __future__ import annotations
import time
from typing import Any
import pytest
from .test_ui import open_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_networkidle_is_noop(page: Any, live_server: Any, browser_session: Any) -> None:
    open_session(page, live_server, browser_session)
    held: list[Any] = []
    page.route("**/tabs/log/**", lambda route: held.append(route))
    page.click("#tab-log")
    t = time.monotonic()
    page.wait_for_timeout(500)
    print("networkidle took", time.monotonic() - t, "held", len(held))
    page.click("#tab-compare")
    page.wait_for_selector("#compare")
    print("url", page.url)
    for r in held:
        r.continue_()
    page.wait_for_timeout(1000)
    print("url after", page.url, "compare present", page.locator("#compare").count(),
          "selected", page.locator("[role=tab][aria-selected=true]").get_attribute("id"))
