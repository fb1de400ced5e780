"""Where the proxy's upstream is and which key the server holds for it: the one owner of
CTXWEB_UPSTREAM_<PROVIDER>_URL and CTXWEB_UPSTREAM_<PROVIDER>_API_KEY (docs/deployment.md).

The proxy forwards there (sessions_app/proxy/upstream.py, proxy/auth.py) and the summarizer
provider `upstream` writes summaries there (services/proxying/summaries.py). A key read here
is kept in memory for the call that needs it, never stored or logged.
"""

from __future__ import annotations

from typing import Final, Literal

from django.conf import settings

__all__ = ["UpstreamProvider", "server_credentials", "server_key", "upstream_base"]

UpstreamProvider = Literal["anthropic", "openai"]

_URLS: Final = {
    "anthropic": "CTXWEB_UPSTREAM_ANTHROPIC_URL",
    "openai": "CTXWEB_UPSTREAM_OPENAI_URL",
}
_KEYS: Final = {
    "anthropic": "CTXWEB_UPSTREAM_ANTHROPIC_API_KEY",
    "openai": "CTXWEB_UPSTREAM_OPENAI_API_KEY",
}
_DEFAULTS: Final = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"}


def upstream_base(provider: UpstreamProvider) -> str:
    """The provider's upstream address without a trailing slash (`https://api.openai.com`);
    the API paths (`/v1/messages`) follow it."""
    return str(getattr(settings, _URLS[provider], "") or _DEFAULTS[provider]).rstrip("/")


def server_key(provider: UpstreamProvider) -> str:
    """The server's own key for the provider's upstream; empty when it has none."""
    return str(getattr(settings, _KEYS[provider], "") or "")


def server_credentials(provider: UpstreamProvider) -> dict[str, str]:
    """The server's key as the provider's credential header (`x-api-key` for Anthropic, a
    Bearer `authorization` for OpenAI); empty when the server has none."""
    key = server_key(provider)
    if not key:
        return {}
    if provider == "anthropic":
        return {"x-api-key": key}
    return {"authorization": f"Bearer {key}"}
