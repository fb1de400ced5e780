"""The request formats the proxy stores, and the context format each one's head is in."""

from __future__ import annotations

from typing import Literal

from sessions_app.services.context.text import Format

__all__ = ["ProxyFormat", "context_format"]

#: The context formats, and OpenAI Responses, whose rewritten head is rendered from the
#: Anthropic form into items (sessions_app/proxy/responses.py).
ProxyFormat = Literal["anthropic", "openai", "responses"]


def context_format(provider: ProxyFormat) -> Format:
    """The context format a request's head is rendered in."""
    return "anthropic" if provider == "responses" else provider
