"""ASGI entry point (the production default: docs/deployment.md)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
_django = get_asgi_application()

from sessions_app.proxy.asgi import with_proxy_route  # noqa: E402  (needs the app loaded)
from sessions_app.proxy.pool import with_upstream_lifespan  # noqa: E402

application = with_upstream_lifespan(with_proxy_route(_django))
