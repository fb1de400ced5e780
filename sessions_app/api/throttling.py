"""Rate limits of the endpoints that can call a paid summary model (django-ninja throttles).

`SummarizerThrottle("compact")` limits a caller to CTXWEB_THROTTLE_COMPACT requests (e.g.
`30/min`) per window. The caller is the API key that authenticated the request, or the user
of a browser session. One counter per caller and fixed window, shared by every web process
(sessions_app/counters.py: Redis or Memcached, else a database row), counted before it is
compared: of requests arriving together exactly the limit pass. Over the limit, django-ninja
answers 429 with `Retry-After` (the seconds left in the window).

Unlike `ninja.throttling.SimpleRateThrottle`, no per-request state is kept on the (shared)
throttle object: with threaded web processes two requests may be checked at once.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from typing import Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from ninja.throttling import BaseThrottle

from ..counters import count
from ..models import ApiKey

__all__ = ["SummarizerThrottle", "parse_rate"]

_RATE: Final = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|m|min|h|hour|d|day)\s*$")
_PERIODS: Final = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}
_DAY: Final = 86400
_OFF: Final = frozenset({"", "0", "off", "none"})


def parse_rate(rate: str) -> tuple[int, int] | None:
    """`"30/min"` -> (30, 60); `"100/5m"` -> (100, 300); None for "off" (no limit)."""
    if rate.strip().lower() in _OFF:
        return None
    match = _RATE.match(rate.lower())
    if match is None or int(match.group(1)) <= 0:
        raise ImproperlyConfigured(
            f"bad rate {rate!r}: use N/unit (unit s, min, hour or day, e.g. 30/min) or off"
        )
    multiple = int(match.group(2) or 1)
    unit = _PERIODS.get(match.group(3), _DAY)
    return int(match.group(1)), max(1, multiple) * unit


class SummarizerThrottle(BaseThrottle):
    """At most CTXWEB_THROTTLE_<SCOPE> requests per caller and window (read on each request)."""

    #: The clock (seconds since the epoch); tests replace it.
    timer: Callable[[], float] = staticmethod(time.time)

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self._local = threading.local()

    def allow_request(self, request: HttpRequest) -> bool:
        self._local.wait = None
        rate = parse_rate(str(getattr(settings, f"CTXWEB_THROTTLE_{self.scope.upper()}", "")))
        if rate is None:
            return True
        limit, period = rate
        now = self.timer()
        window = int(now // period)
        key = f"ctxweb:throttle:{self.scope}:{_caller(request)}:{period}:{window}"
        if count([key], period + 1).value <= limit:
            return True
        self._local.wait = (window + 1) * period - now
        return False

    def wait(self) -> float | None:
        """Seconds until the current window ends (for Retry-After), after a refusal."""
        wait: float | None = getattr(self._local, "wait", None)
        return wait


def _caller(request: HttpRequest) -> str:
    """The API key's public lookup when one authenticated the request, else the user id."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    lookup = ApiKey.lookup_of(token.strip()) if scheme.lower() == "bearer" else None
    if lookup is not None:
        return "key-" + _digest(lookup)
    user = getattr(request, "auth", None)
    if user is not None and getattr(user, "pk", None) is not None:
        return f"user-{user.pk}"
    # Not reached behind the API's authentication; counted per address all the same.
    return "addr-" + _digest(str(request.META.get("REMOTE_ADDR") or "unknown"))


def _digest(value: str) -> str:
    # Cache keys of a bounded length and alphabet, whatever the request held.
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:32]
