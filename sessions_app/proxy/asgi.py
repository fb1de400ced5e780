"""The proxy's ASGI route: `/proxy/` requests skip the browser middleware.

Every other path goes through Django's whole middleware stack (sessions, CSRF, messages,
CSP, htmx...). Those are synchronous: under ASGI each request through them hops to a
thread and back, and on a busy machine the hops cost more than the proxy's own work. The
proxy's views need none of them (they authenticate with API keys, are exempt from CSRF
and answer in the provider's error format, the body size limit and ALLOWED_HOSTS
included), so its paths are served by a second Django handler with no middleware: same
URLs, same views, same signals (database connections are managed as for any request).
Security headers (CSP, HSTS...) are not added to the provider's answers.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

from .pool import Asgi, Receive, Scope, Send

__all__ = ["PREFIX", "ProxyHandler", "with_proxy_route"]

PREFIX = "/proxy/"


class ProxyHandler(ASGIHandler):
    """Django's ASGI handler without middleware, and without a thread made per request."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """As Django's handler answers, but outside a ThreadSensitiveContext. Django makes a
        thread for each request's synchronous code; the proxy's views run theirs on
        threads of their own (proxy/connections.py), so that thread would only ever run
        the request_started and request_finished signals, and making it and stopping it
        cost more than those signals on the process's one shared thread."""
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        """No middleware: the view's response is the answer."""
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler = self._get_response_async if is_async else self._get_response  # type: ignore[attr-defined]
        self._middleware_chain = convert_exception_to_response(handler)


def with_proxy_route(app: Asgi) -> Asgi:
    """`app` for every path but `/proxy/...`, served by a ProxyHandler."""
    proxy = ProxyHandler()

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith(PREFIX):
            await proxy(scope, receive, send)
            return
        await app(scope, receive, send)

    return application
