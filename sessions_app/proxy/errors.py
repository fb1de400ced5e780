"""Errors the proxy itself answers, in the shape the caller's SDK understands."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

from .base import Provider

__all__ = ["error_response"]

_OPENAI_TYPES = {
    "authentication_error": "invalid_request_error",
    "timeout_error": "timeout",
    "api_error": "server_error",
}


def error_response(provider: Provider, status: int, kind: str, message: str) -> JsonResponse:
    """An Anthropic (`{type: error, error: {type, message}}`) or OpenAI (`{error: {...}}`)
    error body with `status`."""
    body: dict[str, Any]
    if provider == "anthropic":
        body = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        error = {"message": message, "type": _OPENAI_TYPES.get(kind, kind), "param": None}
        body = {"error": {**error, "code": kind}}
    return JsonResponse(body, status=status)
