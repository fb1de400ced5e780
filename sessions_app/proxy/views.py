"""The proxy's endpoints: authenticate, store and compact, forward, stream the answer back.

Fail open (docs/architecture.md): when ctxweb's own storage or compaction fails, the
original request goes upstream unmodified and the failure is logged (never a key).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, Final

import httpx
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from sessions_app.services.proxying.overflow import replan_after_overflow
from sessions_app.services.proxying.summaries import ConversationUpstream, summaries_through
from sessions_app.services.proxying.turns import ProxyPlan, plan_request

from ..auth import Throttled
from ..middleware import max_body_bytes, oversized_body
from ..unstorable import clean
from .anthropic import AnthropicAdapter
from .auth import Caller, authenticate, unchecked
from .base import Adapter
from .connections import step
from .digests import decode_body
from .errors import error_response
from .mapping import MAX_NAME, proxy_request
from .openai import OpenAIAdapter
from .outage import database_paused, note_failure
from .overflow import Overflow, leading_events, overflow_of
from .pool import upstream_client
from .recorder import Recording, relay
from .responses_route import (
    COMPACTION,
    TURN,
    adapter_for,
    before_responses,
    forward_models,
    kind_of,
    recorded_compaction,
)
from .upstream import request_headers, response_headers, timeout, upstream_url

__all__ = [
    "anthropic_count_tokens",
    "anthropic_messages",
    "openai_chat_completions",
    "openai_models",
    "openai_responses",
]

logger = logging.getLogger("sessions_app")

MODES: Final = ("compact", "observe")
#: JSON escapes of what no database stores (NUL, a surrogate): such a body is cleaned
#: before it is read for storing (a false positive only costs the cleaning).
_UNSTORABLE: Final = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_ANTHROPIC = AnthropicAdapter()
_OPENAI = OpenAIAdapter()


@csrf_exempt
async def anthropic_messages(request: HttpRequest) -> HttpResponseBase:
    """`POST /proxy/anthropic/v1/messages`."""
    return await _proxy(request, _ANTHROPIC, "/v1/messages", record=True)


@csrf_exempt
async def anthropic_count_tokens(request: HttpRequest) -> HttpResponseBase:
    """`POST /proxy/anthropic/v1/messages/count_tokens`: forwarded, nothing stored."""
    return await _proxy(request, _ANTHROPIC, "/v1/messages/count_tokens", record=False)


@csrf_exempt
async def openai_chat_completions(request: HttpRequest) -> HttpResponseBase:
    """`POST /proxy/openai/v1/chat/completions`."""
    return await _proxy(request, _OPENAI, "/v1/chat/completions", record=True)


@csrf_exempt
async def openai_responses(request: HttpRequest) -> HttpResponseBase:
    """`POST /proxy/openai/v1/responses`; a websocket upgrade, a compressed body and Codex's
    request kinds first (proxy/responses_route.py)."""
    early = before_responses(request, max_body_bytes())
    if early is not None:
        return early
    adapter, kind = adapter_for(request), kind_of(request)
    # A 400 `context_length_exceeded`, or a streamed `response.failed` with that code before
    # any output, is compacted past and retried as for the other routes (_forward, _recovered).
    response = await _proxy(request, adapter, "/v1/responses", record=kind == TURN)
    if kind == COMPACTION:
        return await recorded_compaction(request, adapter, response)
    return response


@csrf_exempt
async def openai_models(request: HttpRequest, model: str = "") -> HttpResponseBase:
    """`GET /proxy/openai/v1/models[/<model>]`: forwarded, nothing stored."""
    return await forward_models(request, f"/v1/models/{model}" if model else "/v1/models")


async def _proxy(
    request: HttpRequest, adapter: Adapter, path: str, *, record: bool
) -> HttpResponseBase:
    """Every answer of the proxy's own is in the provider's error format: a failure of its
    own that escaped the fail-open paths is logged and answered 502, never a 500 page."""
    try:
        return await _answered(request, adapter, path, record=record)
    except Exception:
        logger.exception("proxy: the request failed in ctxweb")
        message = "ctxweb failed to handle the request (logged); retry"
        return error_response(adapter.provider, 502, "api_error", message)


async def _answered(
    request: HttpRequest, adapter: Adapter, path: str, *, record: bool
) -> HttpResponseBase:
    if request.method != "POST":
        return error_response(adapter.provider, 405, "invalid_request_error", "use POST")
    try:  # ALLOWED_HOSTS, which the skipped CommonMiddleware checks elsewhere (proxy/asgi.py)
        request.get_host()
    except DisallowedHost:
        return error_response(adapter.provider, 400, "invalid_request_error", "host not allowed")
    refused = _refused(request, adapter)
    if refused is not None:
        return refused
    mode = (request.headers.get("X-Ctxweb-Mode") or "").strip().lower()
    if database_paused():  # found unreachable just before: not waited on again (outage.py)
        caller, body, recording = unchecked(request, adapter.provider), request.body, None
        if caller is None:
            return _unavailable(adapter)
    else:
        try:  # one hop to a thread for the key check and the storing
            prepared = step(_prepared, asgi=isinstance(request, ASGIRequest))
            caller, body, recording = await prepared(request, adapter, mode, record)
        except Throttled as throttled:  # too many failed authentications (proxy/auth.py)
            return _throttled(adapter, throttled)
        except DatabaseError:
            logger.exception("proxy: ctxweb's database is unavailable; the key cannot be checked")
            return _unavailable(adapter)
        except RecursionError:
            message = "the request body nests JSON too deeply for ctxweb to read"
            return error_response(adapter.provider, 400, "invalid_request_error", message)
    if caller is None:
        message = "a valid ctxweb API key is required (x-api-key, Bearer or X-Ctxweb-Key)"
        return error_response(adapter.provider, 401, "authentication_error", message)
    invalid = _invalid_headers(mode, _session_name(request))
    if invalid is not None:
        return error_response(adapter.provider, 400, "invalid_request_error", invalid)
    return await _forward(request, adapter, caller, path, body, recording)


def _session_name(request: HttpRequest) -> str:
    return (request.headers.get("X-Ctxweb-Session") or "").strip()


def _invalid_headers(mode: str, name: str) -> str | None:
    """Why X-Ctxweb-Mode or X-Ctxweb-Session is refused (None: both are fine). A name that
    does not fit the session's key is refused: cut, it would split the conversation."""
    if mode and mode not in MODES:
        return f"X-Ctxweb-Mode must be one of {', '.join(MODES)}"
    if len(name) > MAX_NAME:
        return f"X-Ctxweb-Session is {len(name)} characters long; at most {MAX_NAME} are allowed"
    return None


def _throttled(adapter: Adapter, throttled: Throttled) -> HttpResponseBase:
    response = error_response(adapter.provider, 429, "rate_limit_error", str(throttled))
    response["Retry-After"] = str(throttled.retry_after)
    return response


def _unavailable(adapter: Adapter) -> HttpResponseBase:
    message = "ctxweb cannot check its API key now (database unavailable); retry later"
    return error_response(adapter.provider, 503, "api_error", message)


def _refused(request: HttpRequest, adapter: Adapter) -> HttpResponseBase | None:
    """A body over CTXWEB_MAX_BODY_BYTES, by its Content-Length or, without one (a chunked
    body), by its size once received: the proxy's routes skip the middleware that checks
    it elsewhere (proxy/asgi.py)."""
    message = oversized_body(request)
    if message is None and request.META.get("CONTENT_LENGTH"):
        return None  # the server received as many bytes as declared
    if message is None:
        try:
            size, limit = len(request.body), max_body_bytes()
        except RequestDataTooBig:
            size, limit = -1, max_body_bytes()
        if 0 <= size <= limit:
            return None
        shown = f"of {size} bytes " if size >= 0 else ""
        message = f"request body {shown}exceeds the limit of {limit} bytes"
    return error_response(adapter.provider, 413, "request_too_large", message)


def _prepared(
    request: HttpRequest, adapter: Adapter, mode: str, record: bool
) -> tuple[Caller | None, bytes, Recording | None]:
    """The caller (None: no valid key), the bytes to forward and where the answer goes."""
    caller = authenticate(request, adapter.provider)
    if caller is None or not record or caller.user is None:
        return caller, request.body, None
    if _invalid_headers(mode, _session_name(request)) is not None:
        return caller, request.body, None
    body, recording = _planned(request, adapter, caller, mode)
    return caller, body, recording


def _planned(
    request: HttpRequest, adapter: Adapter, caller: Caller, mode: str
) -> tuple[bytes, Recording | None]:
    """The bytes to forward and where the answer is recorded (fail open: the original).
    A body holding what no database stores (NUL, lone surrogates) is stored cleaned
    (sessions_app/unstorable.py `clean`) and forwarded as the client sent it."""
    raw = request.body
    try:
        decoded, hashes = decode_body(raw)
        unstorable = _UNSTORABLE.search(raw) is not None
        conversation = adapter.conversation(clean(decoded) if unstorable else decoded)
    except (ValueError, AttributeError):
        return raw, None  # not a request ctxweb can read: upstream answers it
    if not conversation.messages:
        return raw, None
    if hashes is not None and conversation.lead:  # the conversation's messages' only
        hashes = hashes[len(conversation.lead) :]
    try:
        wanted = proxy_request(
            adapter, conversation, name=_session_name(request), mode=mode, raw=hashes
        )
        # A summary written now goes through the conversation's upstream and key (the
        # summarizer provider `upstream`, docs/summarizers.md); kept for this call only.
        upstream = ConversationUpstream(adapter.provider, wanted.model, caller.credentials)
        with summaries_through(upstream):
            plan = plan_request(caller.user, wanted)
    except Exception as error:
        note_failure(error)
        logger.exception("proxy: storing or compacting failed; forwarding the request unchanged")
        return raw, None
    if plan is None:  # a side request of an agent's session: forwarded, not stored
        return raw, None
    asgi = isinstance(request, ASGIRequest)
    recording = Recording(adapter=adapter, plan=plan, compact=plan.compact, asgi=asgi)
    if plan.head is None:
        return raw, recording
    return _rewritten(adapter, decoded, plan.head, plan.tail_start, unstorable), recording


def _rewritten(
    adapter: Adapter, decoded: Any, head: list[dict[str, Any]], tail_start: int, ascii: bool
) -> bytes:
    """The body with the runtime context's `head` before the client's own messages from
    `tail_start` (as the client sent them; `ascii`: escaped, as a lone surrogate must be)."""
    conversation = adapter.conversation(decoded)
    messages = [*head, *conversation.messages[tail_start:]]
    outgoing = adapter.outgoing(decoded, conversation, messages)
    return json.dumps(outgoing, ensure_ascii=ascii).encode("utf-8")


async def _forward(
    request: HttpRequest,
    adapter: Adapter,
    caller: Caller,
    path: str,
    body: bytes,
    recording: Recording | None,
) -> HttpResponseBase:
    """Send upstream; stream an event stream through (under ASGI), else answer whole."""
    url = upstream_url(adapter.provider, path, str(request.META.get("QUERY_STRING", "")))
    headers = request_headers(dict(request.headers), caller.credentials)
    headers["content-type"] = "application/json"
    pooled = isinstance(request, ASGIRequest)
    client = upstream_client(pooled=pooled)
    owned = None if pooled else client
    try:
        upstream = await client.send(
            client.build_request("POST", url, content=body, headers=headers, timeout=timeout()),
            stream=True,
        )
    except httpx.TimeoutException:
        await _close(owned)
        return error_response(adapter.provider, 504, "timeout_error", "upstream timed out")
    except httpx.HTTPError as error:
        await _close(owned)
        logger.warning("proxy: upstream unreachable: %s", type(error).__name__)
        return error_response(adapter.provider, 502, "api_error", "upstream unreachable")
    sent = (client, url, headers)
    upstream, recording, read, rest = await _recovered(
        request, adapter, caller, sent, upstream, recording
    )
    content_type = upstream.headers.get("content-type", "")
    answered = upstream.status_code == 200 and recording is not None
    if content_type.startswith("text/event-stream") and isinstance(request, ASGIRequest):
        kept = recording if answered else None
        streamed = StreamingHttpResponse(
            relay(owned, upstream, kept, read=read, rest=rest), status=upstream.status_code
        )
        return _with_headers(streamed, upstream)
    try:
        data = await upstream.aread()
    except httpx.TimeoutException:
        return error_response(adapter.provider, 504, "timeout_error", "upstream timed out")
    finally:
        await upstream.aclose()
        await _close(owned)
    if answered and recording is not None:
        await recording.store(recording.answer_of(data, content_type))
    return _with_headers(HttpResponse(data, status=upstream.status_code), upstream)


async def _retried(
    request: HttpRequest,
    adapter: Adapter,
    caller: Caller,
    sent: tuple[httpx.AsyncClient, str, dict[str, str]],
    upstream: httpx.Response,
    recording: Recording,
) -> tuple[httpx.Response, Recording]:
    """After the upstream refused the request as too long (compact mode): the session
    compacted harder and the request sent once more, whose answer, error or not, is the
    client's (docs/behaviour.md#overflow-recovery). The first answer, read, when it is no
    such refusal, nothing could be compacted, or the retry could not be sent."""
    overflow = overflow_of(adapter.provider, upstream.status_code, await upstream.aread())
    retried = (
        None
        if overflow is None
        else await _retry(request, adapter, caller, sent, recording, overflow)
    )
    if retried is None:
        return upstream, recording
    await upstream.aclose()
    return retried


async def _recovered(
    request: HttpRequest,
    adapter: Adapter,
    caller: Caller,
    sent: tuple[httpx.AsyncClient, str, dict[str, str]],
    upstream: httpx.Response,
    recording: Recording | None,
) -> tuple[httpx.Response, Recording | None, list[bytes], AsyncIterator[bytes] | None]:
    """In compact mode, the answer after an upstream's refusal for length, a 400 or streamed
    before any output (the Responses API's `response.failed`), is the retry's
    (docs/behaviour.md#overflow-recovery); else a stream's chunks read and the rest, which
    go to the client as they came."""
    if recording is not None and recording.compact and upstream.status_code == 400:
        upstream, recording = await _retried(request, adapter, caller, sent, upstream, recording)
        return upstream, recording, [], None
    streams = upstream.headers.get("content-type", "").startswith("text/event-stream")
    if not (streams and isinstance(request, ASGIRequest) and upstream.status_code == 200):
        return upstream, recording, [], None
    if recording is None or not recording.compact:
        return upstream, recording, [], None
    rest = upstream.aiter_bytes()
    read, overflow = await leading_events(rest, adapter.provider)
    retried = (
        None
        if overflow is None
        else await _retry(request, adapter, caller, sent, recording, overflow)
    )
    if retried is None:
        return upstream, recording, read, rest
    await upstream.aclose()
    return retried[0], retried[1], [], None


async def _retry(
    request: HttpRequest,
    adapter: Adapter,
    caller: Caller,
    sent: tuple[httpx.AsyncClient, str, dict[str, str]],
    recording: Recording,
    overflow: Overflow,
) -> tuple[httpx.Response, Recording] | None:
    """The request sent once more after the session was compacted under the window the
    upstream refused it for; None when nothing could be compacted or it could not be sent."""
    plan = await step(_replanned, asgi=recording.asgi)(recording.plan, adapter, caller, overflow)
    if plan is None or plan.head is None:
        return None
    decoded, _ = decode_body(request.body)
    ascii = _UNSTORABLE.search(request.body) is not None
    body = _rewritten(adapter, decoded, plan.head, plan.tail_start, ascii)
    client, url, headers = sent
    try:
        retry = await client.send(
            client.build_request("POST", url, content=body, headers=headers, timeout=timeout()),
            stream=True,
        )
    except httpx.HTTPError:
        return None
    return retry, replace(recording, plan=plan)


def _replanned(
    plan: ProxyPlan, adapter: Adapter, caller: Caller, overflow: Overflow
) -> ProxyPlan | None:
    """The retry's plan (services/proxying/overflow.py), its summaries written through the
    conversation's upstream as the request's were; None (logged) when it failed."""
    model = plan.request.model if plan.request is not None else ""
    try:
        with summaries_through(ConversationUpstream(adapter.provider, model, caller.credentials)):
            return replan_after_overflow(plan, limit=overflow.limit, counted=overflow.counted)
    except Exception as error:
        note_failure(error)
        logger.exception("proxy: overflow recovery failed; the upstream's error is answered")
        return None


async def _close(client: httpx.AsyncClient | None) -> None:
    if client is not None:
        await client.aclose()


def _with_headers(response: HttpResponseBase, upstream: httpx.Response) -> HttpResponseBase:
    for name, value in response_headers(upstream.headers):
        response[name] = value
    return response
