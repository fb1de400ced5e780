"""The Responses route's own steps around the shared proxy path (proxy/views.py `_proxy`).

- A websocket upgrade (`GET …/responses`, what Codex's built-in provider tries first) is
  answered 426 at once: Codex then falls back to HTTP (a 404 costs it seconds of retries).
- A body sent with `Content-Encoding: gzip` or `zstd` is decompressed before anything reads
  it, bounded by CTXWEB_MAX_BODY_BYTES (413 past it; an undecodable one is a 400), and goes
  upstream decompressed.
- Codex's request kind (`x-codex-turn-metadata`): a `prewarm` is forwarded, not stored; a
  `compaction` (or a trailing `compaction_trigger` item) is forwarded, not stored as a
  turn, and its answer becomes a compaction point of the conversation's session
  (services/proxying/client_compaction.py).
- `GET …/models` is forwarded with the same authentication.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import httpx
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

from sessions_app.services.proxying.client_compaction import (
    ClientCompaction,
    record_client_compaction,
)

from ..auth import Throttled
from .auth import authenticate
from .connections import step
from .errors import error_response
from .mapping import proxy_request
from .pool import upstream_client
from .responses import ResponsesAdapter, ResponsesStream, compaction_output, request_kind
from .streaming import SseParser
from .upstream import request_headers, response_headers, timeout, upstream_url

__all__ = ["adapter_for", "before_responses", "forward_models", "kind_of", "recorded_compaction"]

logger = logging.getLogger("sessions_app")

TURN: Final = "turn"
PREWARM: Final = "prewarm"
COMPACTION: Final = "compaction"
_ENCODINGS: Final = ("gzip", "zstd")
#: The first words of Codex's checkpoint prompt (a custom provider's compaction request).
_CHECKPOINT: Final = "You are performing a CONTEXT CHECKPOINT COMPACTION"
_COMPACTION_MARKS: Final = (b'"compaction_trigger"', _CHECKPOINT.encode())


class _TooLarge(Exception):
    """The decompressed body is over the limit."""


def before_responses(request: HttpRequest, limit: int) -> HttpResponseBase | None:
    """The answer when the request is not one to forward (a websocket upgrade, a body that
    cannot be decompressed or is over `limit` bytes once it is: CTXWEB_MAX_BODY_BYTES);
    None: go on (body decompressed)."""
    if request.method == "GET" and "websocket" in request.headers.get("upgrade", "").lower():
        response = error_response(
            "openai", 426, "invalid_request_error", "websockets are not served; use HTTP POST"
        )
        response["Upgrade"] = "HTTP/1.1"
        return response
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if request.method != "POST" or encoding in ("", "identity"):
        return None
    if encoding not in _ENCODINGS:
        message = f"Content-Encoding {encoding!r} is not accepted; send gzip, zstd or none"
        return error_response("openai", 415, "invalid_request_error", message)
    if _declared(request) > limit:
        message = f"request body exceeds the limit of {limit} bytes"
        return error_response("openai", 413, "request_too_large", message)
    try:
        body = _decompressed(request.body, encoding, limit)
    except _TooLarge:
        message = f"the decompressed request body exceeds the limit of {limit} bytes"
        return error_response("openai", 413, "request_too_large", message)
    except Exception:  # zlib, zstandard and gzip raise their own kinds on a bad body
        message = f"the request body is not valid {encoding} data"
        return error_response("openai", 400, "invalid_request_error", message)
    _replace_body(request, body)
    return None


def _declared(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _decompressed(data: bytes, encoding: str, limit: int) -> bytes:
    """`data` decompressed, read no further than `limit` + 1 bytes (_TooLarge past it)."""
    if encoding == "zstd":
        import zstandard  # the web extra's; imported where used

        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data), read_across_frames=True
        )
        body = reader.read(limit + 1)
        if len(body) <= limit:  # all of it: check the last frame is whole (bounded now)
            whole = zstandard.ZstdDecompressor().decompressobj()
            whole.decompress(data)
            if not whole.eof:
                raise ValueError("truncated zstd data")
    else:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        body = inflater.decompress(data, limit + 1)
        if len(body) <= limit and not inflater.eof:
            raise gzip.BadGzipFile("truncated gzip data")
    if len(body) > limit:
        raise _TooLarge
    return body


def _replace_body(request: HttpRequest, body: bytes) -> None:
    """The request as if it had been sent uncompressed (its headers are read afresh)."""
    request._body = body  # HttpRequest.body's own cache
    request.META.pop("HTTP_CONTENT_ENCODING", None)
    request.META["CONTENT_LENGTH"] = str(len(body))
    request.__dict__.pop("headers", None)  # a cached_property built from META


def adapter_for(request: HttpRequest) -> ResponsesAdapter:
    """The adapter of one request: Codex's `session-id` header names its conversation."""
    return ResponsesAdapter(session=request.headers.get("session-id", "").strip())


def kind_of(request: HttpRequest) -> str:
    """TURN, PREWARM or COMPACTION: Codex's `request_kind`, else a body whose last input
    item is a `compaction_trigger` (the built-in provider's), or which has no tools and ends
    with Codex's checkpoint prompt (a custom provider's), is a COMPACTION, else a TURN."""
    kind = request_kind(request.headers)
    if kind in (PREWARM, COMPACTION):
        return kind
    if not any(mark in request.body for mark in _COMPACTION_MARKS):
        return TURN
    try:
        body = json.loads(request.body)
        items = body.get("input")
    except (ValueError, AttributeError):
        return TURN
    last = items[-1] if isinstance(items, list) and items else None
    if not isinstance(last, Mapping):
        return TURN
    if last.get("type") == "compaction_trigger":
        return COMPACTION
    text = json.dumps(last.get("content"))
    return COMPACTION if body.get("tools") == [] and _CHECKPOINT in text else TURN


async def recorded_compaction(
    request: HttpRequest, adapter: ResponsesAdapter, response: HttpResponseBase
) -> HttpResponseBase:
    """`response` (to a compaction request) as it is; its answer, once complete, recorded as
    a compaction point of the conversation's session."""
    if response.status_code != 200:
        return response
    if isinstance(response, StreamingHttpResponse) and response.is_async:
        response.streaming_content = _watched(response.streaming_content, request, adapter)
        return response
    if isinstance(response, HttpResponse):
        try:
            whole = json.loads(response.content)
        except ValueError:
            return response
        if isinstance(whole, dict):
            await _record(request, adapter, whole)
    return response


async def _watched(
    content: Any, request: HttpRequest, adapter: ResponsesAdapter
) -> AsyncIterator[bytes]:
    stream = ResponsesStream()
    parser: SseParser | None = SseParser(stream)
    async for chunk in content:
        if parser is not None:
            try:
                parser.feed(chunk)
            except Exception:  # the recorder never breaks the stream
                logger.exception("proxy: a streamed event could not be read")
                parser = None
            whole = stream.whole()
            if parser is not None and stream.finished:
                parser = None
                if whole is not None:
                    await _record(request, adapter, whole)
        yield chunk


async def _record(request: HttpRequest, adapter: ResponsesAdapter, whole: dict[str, Any]) -> None:
    """Record the compaction a complete response holds; a failure is logged, not raised."""
    item = compaction_output(whole)
    texts = [
        str(part.get("text") or "")
        for output in whole.get("output") or []
        if isinstance(output, Mapping) and output.get("type") == "message"
        for part in output.get("content") or []
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    ]
    found = ClientCompaction(
        summary="\n".join(t for t in texts if t),
        item=item,
        response_id=str(whole.get("id") or ""),
        window=request.headers.get("x-codex-window-id", ""),
        details={"usage": whole.get("usage")} if whole.get("usage") else {},
    )
    try:
        await step(_store, asgi=isinstance(request, ASGIRequest))(request, adapter, found)
    except Exception:
        logger.exception("proxy: the client's compaction could not be recorded")


def _store(request: HttpRequest, adapter: ResponsesAdapter, found: ClientCompaction) -> None:
    caller = authenticate(request, adapter.provider)
    if caller is None or caller.user is None:
        return
    conversation = adapter.conversation(json.loads(request.body))
    name = (request.headers.get("X-Ctxweb-Session") or "").strip()
    key = proxy_request(adapter, conversation, name=name).key
    record_client_compaction(caller.user, key, adapter.source_format, found)


async def forward_models(request: HttpRequest, path: str) -> HttpResponseBase:
    """`GET /proxy/openai/v1/models[/…]`: forwarded as sent, with the route's authentication."""
    if request.method != "GET":
        return error_response("openai", 405, "invalid_request_error", "use GET")
    asgi = isinstance(request, ASGIRequest)
    try:
        caller = await step(authenticate, asgi=asgi)(request, "openai")
    except Throttled as throttled:
        response = error_response("openai", 429, "rate_limit_error", str(throttled))
        response["Retry-After"] = str(throttled.retry_after)
        return response
    except DatabaseError:
        message = "ctxweb cannot check its API key now (database unavailable); retry later"
        return error_response("openai", 503, "api_error", message)
    if caller is None:
        message = "a valid ctxweb API key is required (Bearer or X-Ctxweb-Key)"
        return error_response("openai", 401, "authentication_error", message)
    url = upstream_url("openai", path, str(request.META.get("QUERY_STRING", "")))
    headers = request_headers(dict(request.headers), caller.credentials)
    client = upstream_client(pooled=asgi)
    try:
        upstream = await client.get(url, headers=headers, timeout=timeout())
    except httpx.HTTPError:
        return error_response("openai", 502, "api_error", "upstream unreachable")
    finally:
        if not asgi:
            await client.aclose()
    forwarded = HttpResponse(upstream.content, status=upstream.status_code)
    for name, value in response_headers(upstream.headers):
        forwarded[name] = value
    return forwarded
