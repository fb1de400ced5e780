"""The OpenAI Responses API (`POST /v1/responses`): requests, answers and streamed answers.

The leading developer/system messages of `input` (and `instructions`) are the
conversation's system prompt: kept in front of every forwarded request, counted as
overhead with `tools`, not stored as messages. The rest is read as turns
(proxy/responses_items.py): one stored message each.
Codex's session id (its `session-id` header, else the body's `prompt_cache_key`) names
the conversation; `previous_response_id` is forwarded as sent (the server's own state is
beyond what the proxy can replace: such a conversation is observed, README).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..exporters.responses import message_items
from ..importers.blocks import prompt_text, short_title
from ..importers.provider_compaction import COMPACTION_BLOCK_TYPES
from .base import Answer, Conversation, Provider
from .responses_items import ASSISTANT, USER, Turn, turn_message, turns_of

__all__ = [
    "ResponsesAdapter",
    "ResponsesStream",
    "compaction_output",
    "request_kind",
    "response_answer",
]

logger = logging.getLogger("sessions_app")

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
#: First words of the user messages Codex adds itself (not the title of a session).
_INJECTED: Final = ("<", "# AGENTS.md")


def request_kind(headers: Mapping[str, str], body: Mapping[str, Any] | None = None) -> str:
    """Codex's `request_kind` (`turn`, `compaction`, `prewarm`) from `x-codex-turn-metadata`
    (the header, else the body's `client_metadata`); "" when not said."""
    raw: Any = headers.get("x-codex-turn-metadata")
    if not raw and body is not None and isinstance(body.get("client_metadata"), Mapping):
        raw = body["client_metadata"].get("x-codex-turn-metadata")
    try:
        metadata = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return ""
    kind = metadata.get("request_kind") if isinstance(metadata, Mapping) else None
    return kind if isinstance(kind, str) else ""


class ResponsesAdapter:
    """`POST /v1/responses` bodies; `session` is the client's session id header (Codex's
    `session-id`), which names the conversation before `prompt_cache_key` does."""

    provider: Provider = "openai"
    source_format: str = "responses"

    def __init__(self, session: str = "") -> None:
        self.session = session

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """The conversation of a Responses request (ValueError without a usable `input`)."""
        items = _input_items(body.get("input"))
        head = 0
        while head < len(items) and _is_system(items[head]):
            head += 1
        lead = items[:head]
        turns = turns_of(items[head:])
        instructions = body.get("instructions")
        system = _system(instructions, lead)
        cache_key = body.get("prompt_cache_key")
        previous = body.get("previous_response_id")
        return Conversation(
            system=system,
            tools=body.get("tools"),
            messages=list(turns),
            model=str(body.get("model") or ""),
            metadata=body.get("metadata"),
            stream=bool(body.get("stream")),
            lead=lead,
            client_session=self.session or (cache_key if isinstance(cache_key, str) else ""),
            title=_title(turns),
            previous_response=previous if isinstance(previous, str) else "",
            sizes=tuple(len(turn.sent) for turn in turns),
        )

    def canonical(self, messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
        """Each turn as the one engine message it is stored as."""
        return [[turn_message(str(m.get("role")), _items(m))] for m in messages]

    def outgoing(
        self, body: Mapping[str, Any], conversation: Conversation, messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The body with `input` after the system prompt replaced by `messages`: turns as
        the client sent their items, the runtime context's head (Anthropic-form engine
        messages: turns.py) as items."""
        items: list[Any] = list(conversation.lead)
        custom: set[str] = set()
        for message in messages:
            if isinstance(message, Turn):
                items.extend(message.sent)
            else:
                items.extend(message_items(message, reasoning=False, custom=custom))
        return {**body, "input": items}

    def answer(self, response: Mapping[str, Any]) -> Answer | None:
        """The output items of a response object, with its usage."""
        return response_answer(response)

    def accumulator(self) -> ResponsesStream:
        """A fresh accumulator of Responses stream events."""
        return ResponsesStream()


def _input_items(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ValueError("input must be a string or a list of objects")
    return value


def _system(instructions: Any, lead: list[Any]) -> list[dict[str, Any]] | None:
    """The system part: `instructions` and the leading developer messages; the same list
    object again while they are the same objects (the body reader hands an agent's unchanged
    items back as such: the overhead's digest is remembered for it)."""
    parts = [*_instructions(instructions), *lead]
    if not parts:
        return None
    with _LOCK:
        last = _LAST_SYSTEM[0]
        if len(last) == len(parts) and all(
            a is b or a == b for a, b in zip(last, parts, strict=True)
        ):
            return last
        _LAST_SYSTEM[0] = parts
    return parts


_LOCK: Final = threading.Lock()
#: The last system part built (one list: an agent's is the same from request to request).
_LAST_SYSTEM: list[list[dict[str, Any]]] = [[]]


def _instructions(value: Any) -> list[dict[str, Any]]:
    """The body's `instructions` as the developer message they stand for (the system part)."""
    if not isinstance(value, str) or not value:
        return []
    return [{"type": "message", "role": "developer", "content": value}]


def _is_system(item: Mapping[str, Any]) -> bool:
    kind = item.get("type") or "message"
    return kind == "message" and item.get("role") in _SYSTEM_ROLES


def _items(message: Mapping[str, Any]) -> list[Any]:
    return message.sent if isinstance(message, Turn) else list(message.get("items") or [])


def _title(turns: Sequence[Turn]) -> str:
    """The first text a person wrote (not the context Codex adds before it)."""
    for turn in turns:
        if turn.get("role") != USER:
            continue
        for item in turn.sent:
            if item.get("type", "message") != "message":
                continue
            text = prompt_text(turn_message(USER, [item])["content"]).strip()
            if text and not text.startswith(_INJECTED):
                return short_title(text)
    return ""


def response_answer(response: Mapping[str, Any]) -> Answer | None:
    """The answer of a response object: its output items as one turn, with the usage (None
    when it has no output, or a failed response's)."""
    output = response.get("output")
    if response.get("status") == "failed" or not isinstance(output, list) or not output:
        return None
    items = [item for item in output if isinstance(item, dict)]
    client = Turn.of(ASSISTANT, items)
    canonical = turn_message(ASSISTANT, items)
    usage = _usage(response.get("usage"))
    if usage:
        canonical["usage"] = usage
    if isinstance(response.get("id"), str):
        canonical["id"] = response["id"]
    return Answer(client=dict(client), canonical=canonical)


def compaction_output(response: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The provider `compaction` item of a response's output, if it has one."""
    for item in response.get("output") or []:
        if isinstance(item, Mapping) and item.get("type") in COMPACTION_BLOCK_TYPES:
            return item
    return None


def _usage(usage: Any) -> dict[str, Any]:
    """A response's usage flattened: input and output tokens (input counts the cached ones),
    `cached_tokens` and `reasoning_tokens` from the details."""
    if not isinstance(usage, Mapping):
        return {}
    flat = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    for key, inner in (
        ("input_tokens_details", "cached_tokens"),
        ("output_tokens_details", "reasoning_tokens"),
    ):
        details = usage.get(key)
        if isinstance(details, Mapping) and isinstance(details.get(inner), int):
            flat[inner] = details[inner]
    return flat


def _log_failure(payload: Mapping[str, Any]) -> None:
    """A failed response, as the upstream streamed it to the client (passed through as
    sent; no answer is stored): its code and message in the log."""
    response = payload.get("response")
    error = response.get("error") if isinstance(response, Mapping) else payload.get("error")
    error = error if isinstance(error, Mapping) else payload
    logger.warning(
        "proxy: the upstream's response failed: %s: %s",
        error.get("code") or payload.get("type"),
        str(error.get("message") or "")[:300],
    )


class ResponsesStream:
    """Rebuilds the response from its events: `response.output_item.done` gives each item,
    `response.completed` (or `incomplete`) the whole response; `response.failed` and `error`
    end the stream without an answer (they pass through as sent)."""

    def __init__(self) -> None:
        self.items: dict[int, dict[str, Any]] = {}
        self.response: dict[str, Any] | None = None
        self.failed: dict[str, Any] | None = None
        self.finished = False

    def feed(self, event: str, data: str) -> None:
        """Apply one event (unknown ones are ignored)."""
        try:
            payload = json.loads(data)
        except ValueError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type") or event
        if kind == "response.output_item.done" and isinstance(payload.get("item"), dict):
            index = payload.get("output_index")
            self.items[index if isinstance(index, int) else len(self.items)] = payload["item"]
        elif kind in {"response.completed", "response.incomplete"}:
            self.response = (
                payload.get("response") if isinstance(payload.get("response"), dict) else {}
            )
            self.finished = True
        elif kind in {"response.failed", "error"}:
            self.failed = payload
            self.finished = True
            _log_failure(payload)

    def answer(self) -> Answer | None:
        """The rebuilt response's answer (None after a failure or without output)."""
        if self.response is None:
            return None
        whole = dict(self.response)
        if not whole.get("output"):  # some servers leave the final output empty
            whole["output"] = [self.items[i] for i in sorted(self.items)]
        return response_answer(whole)

    def whole(self) -> dict[str, Any] | None:
        """The completed response with its output items (None before it completed)."""
        if self.response is None:
            return None
        whole = dict(self.response)
        if not whole.get("output"):
            whole["output"] = [self.items[i] for i in sorted(self.items)]
        return whole
