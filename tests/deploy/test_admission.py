"""ctxweb/admission.py: Django's requests run a few at a time, first come first served, and
a slow one stops holding the others up after its slot's seconds."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from ctxweb.admission import Receive, Send, admitted


class Recorder:
    """An ASGI app whose requests take the seconds their path names (`/0.05`), and which
    records how many run at once, and the order they started in."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.started: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        self.started.append(scope["path"])
        try:
            await asyncio.sleep(float(scope["path"].strip("/").split("-")[0]))
            await send({"type": "http.response.start", "status": 200, "headers": []})
        finally:
            self.running -= 1


async def _call(app: Any, path: str, kind: str = "http") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(dict(message))

    await app({"type": kind, "path": path}, receive, send)
    return sent


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_at_most_the_set_number_run_at_once_and_in_the_order_they_came() -> None:
    inner = Recorder()
    app = admitted(inner, at_once=2, slot_seconds=5.0)

    async def burst() -> list[list[dict[str, Any]]]:
        calls = []
        for n in range(8):
            calls.append(asyncio.ensure_future(_call(app, f"/0.02-{n}")))
            await asyncio.sleep(0)  # each call reaches the semaphore before the next is made
        return list(await asyncio.gather(*calls))

    answers = _run(burst())
    assert inner.most == 2
    assert inner.started == [f"/0.02-{n}" for n in range(8)]
    assert all(answer[0]["status"] == 200 for answer in answers)


def test_a_slow_request_gives_its_place_after_its_slot() -> None:
    inner = Recorder()
    app = admitted(inner, at_once=1, slot_seconds=0.05)

    async def slow_then_fast() -> float:
        slow = asyncio.ensure_future(_call(app, "/1.0-slow"))
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await _call(app, "/0-fast")
        waited = loop.time() - began
        await slow
        return waited

    waited = _run(slow_then_fast())
    # The fast request waited for the slow one's slot (0.05 s), not for its end (1 s).
    assert 0.04 <= waited < 0.5
    assert inner.most == 2


def test_no_limit_and_other_kinds_of_scope_pass_through() -> None:
    inner = Recorder()
    assert admitted(inner, at_once=0, slot_seconds=0.1) is inner
    app = admitted(inner, at_once=1, slot_seconds=5.0)

    async def lifespan_beside_a_request() -> None:
        request = asyncio.ensure_future(_call(app, "/0.1-request"))
        await asyncio.sleep(0.01)
        await _call(app, "/0-lifespan", kind="lifespan")  # not counted: not held up
        assert inner.most == 2
        await request

    _run(lifespan_beside_a_request())


def test_a_cancelled_request_is_cancelled_inside_too_and_frees_its_place() -> None:
    inner = Recorder()
    app = admitted(inner, at_once=1, slot_seconds=5.0)

    async def cancel_one() -> None:
        doomed = asyncio.ensure_future(_call(app, "/10-doomed"))
        await asyncio.sleep(0.02)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert inner.running == 0  # the request itself stopped, not just its waiter
        await asyncio.wait_for(_call(app, "/0-next"), timeout=1.0)  # the place is free

    _run(cancel_one())


def test_the_served_application_counts_djangos_requests() -> None:
    """ctxweb/asgi.py puts the count around Django, with the settings' numbers."""
    from django.conf import settings

    assert settings.CTXWEB_WEB_REQUESTS_AT_ONCE == 2
    assert pytest.approx(0.1) == settings.CTXWEB_WEB_REQUEST_SLOT_SECONDS
    import ctxweb.asgi

    assert ctxweb.asgi._counted is not ctxweb.asgi._django
    assert ctxweb.asgi._counted.__qualname__.endswith("admitting")
