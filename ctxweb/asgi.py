"""ASGI entry point (the production default: docs/deployment.md)."""

import os

from django.conf import settings
from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
# Read by the settings, loaded just below: under ASGI each request runs in a thread of its
# own, so connections are not kept per thread but pooled (settings.database_settings).
os.environ["CTXWEB_ASGI_PROCESS"] = "1"
_django = get_asgi_application()

from compaction import count_tokens  # noqa: E402  (after the settings)
from ctxweb.admission import admitted  # noqa: E402
from sessions_app.mcp.asgi import with_mcp_route  # noqa: E402  (needs the app loaded)
from sessions_app.proxy.asgi import with_proxy_route  # noqa: E402  (needs the app loaded)
from sessions_app.proxy.pool import with_upstream_lifespan  # noqa: E402  (needs the app loaded)


def _warm() -> None:
    """Load, before the process serves, what its first requests would wait for: the URL
    patterns (the API and every view module), the token vocabulary and its counter (a
    second or more).
    Under ASGI a new process accepts many requests at once, and every one of them would
    wait for these (bench/load.py saw 15 s appends right after start on a busy machine)."""
    get_resolver().url_patterns  # noqa: B018  (imports ctxweb.urls and its views)
    for encoding in {"o200k_base", settings.CTXWEB_TOKEN_ENCODING}:
        count_tokens([{"role": "user", "content": "warm"}], encoding=encoding)


_warm()
# Django's requests take turns, a few at a time (ctxweb/admission.py); the proxy and `/mcp`
# (sessions_app/mcp/asgi.py) are routed around Django's middleware and this count.
_counted = admitted(
    _django, settings.CTXWEB_WEB_REQUESTS_AT_ONCE, settings.CTXWEB_WEB_REQUEST_SLOT_SECONDS
)
application = with_mcp_route(with_upstream_lifespan(with_proxy_route(_counted)))
