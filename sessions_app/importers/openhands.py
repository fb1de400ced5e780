"""OpenHands event streams: a JSON list of events (or `{"events": [...]}`).

Events are actions and observations. An agent action made through a tool call carries
`tool_call_metadata` (`tool_call_id`, `function_name` and the model response that asked for
it): actions from one model response become one assistant message (its text, then a tool_use
per call, with the response's usage). An observation answers the call named by its own
`tool_call_metadata.tool_call_id`, or by the action its `cause` points to, as a tool_result.
User and agent `message` actions are messages; the `system` action is the system prompt.
State changes, empty observations and other bookkeeping events are kept raw and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from compaction import Block

from .blocks import (
    content_text,
    image_block,
    mapping,
    parse_arguments,
    parse_time,
    short_title,
    text_block,
)
from .builder import SessionBuilder
from .errors import TranscriptError
from .registry import ImportFormat
from .types import ImportedMessage, ImportedSession

__all__ = ["IMPORT_FORMAT", "parse_openhands"]

FORMAT: Final = "openhands"
_BOOKKEEPING_OBSERVATIONS: Final = frozenset({"null", "agent_state_changed", "recall", ""})


def parse_openhands(document: Any, name: str = "") -> ImportedSession:
    """Import an OpenHands event stream."""
    events = document.get("events") if isinstance(document, Mapping) else document
    if not isinstance(events, list):
        raise TranscriptError("an OpenHands import needs a list of events")
    stream = _Stream(SessionBuilder(FORMAT, source_name=name))
    for number, event in enumerate(events, start=1):
        if not isinstance(event, Mapping):
            stream.builder.skip(number, f"events[{number - 1}] is not an object")
        elif isinstance(event.get("action"), str):
            stream.action(event)
        elif isinstance(event.get("observation"), str):
            stream.observation(event)
        else:
            stream.builder.keep_raw("unknown")
    session = stream.finish()
    session.title = short_title(stream.first_prompt or name)
    session.model = stream.model
    return session


class _Stream:
    def __init__(self, builder: SessionBuilder) -> None:
        self.builder = builder
        self.first_prompt = ""
        self.model = ""
        self._calls_by_event: dict[Any, str] = {}
        self._reply: ImportedMessage | None = None
        self._response_id: str | None = None
        self._results: ImportedMessage | None = None

    # -- actions -----------------------------------------------------------------------------

    def action(self, event: Mapping[str, Any]) -> None:
        kind = event["action"]
        args = mapping(event.get("args"))
        metadata = event.get("tool_call_metadata")
        if isinstance(metadata, Mapping) and isinstance(metadata.get("tool_call_id"), str):
            self._tool_action(event, args, metadata)
        elif kind == "system":
            self._flush()
            tools = args.get("tools")
            self.builder.add(
                ImportedMessage(
                    message={"role": "system", "content": str(args.get("content") or "")},
                    created_at=parse_time(event.get("timestamp")),
                    original_id=str(event.get("id", "")),
                    extra={"tools": tools} if tools else {},
                )
            )
        elif kind == "message":
            self._message(event, args)
        else:
            self.builder.keep_raw(f"action/{kind}")

    def _message(self, event: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        self._flush()
        role = "user" if event.get("source") == "user" else "assistant"
        text = args.get("content") if isinstance(args.get("content"), str) else event.get("message")
        blocks: list[Block] = [text_block(str(text or ""))]
        for url in args.get("image_urls") or []:
            blocks.append(image_block(url))
        if role == "user" and not self.first_prompt:
            self.first_prompt = str(text or "")
        self.builder.add(
            ImportedMessage(
                message={"role": role, "content": blocks if len(blocks) > 1 else str(text or "")},
                created_at=parse_time(event.get("timestamp")),
                original_id=str(event.get("id", "")),
            )
        )

    def _tool_action(
        self, event: Mapping[str, Any], args: Mapping[str, Any], metadata: Mapping[str, Any]
    ) -> None:
        call_id = str(metadata["tool_call_id"])
        response = metadata.get("model_response")
        response = response if isinstance(response, Mapping) else {}
        response_id = response.get("id") if isinstance(response.get("id"), str) else None
        said, arguments = _from_response(response, call_id)
        if self._reply is None or response_id is None or response_id != self._response_id:
            self._flush()
            thought = said or args.get("thought")
            content: list[Block] = [text_block(thought)] if isinstance(thought, str) else []
            self._reply = ImportedMessage(
                message={"role": "assistant", "content": content},
                created_at=parse_time(event.get("timestamp")),
                original_id=response_id or str(event.get("id", "")),
                usage=dict(response["usage"])
                if isinstance(response.get("usage"), Mapping)
                else None,
            )
            self._response_id = response_id
            if isinstance(response.get("model"), str):
                self.model = response["model"]
        if arguments is None:
            arguments = {k: v for k, v in args.items() if k != "thought"}
        self._reply.message["content"].append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": str(metadata.get("function_name") or event["action"]),
                "input": arguments,
            }
        )
        self._calls_by_event[event.get("id")] = call_id

    # -- observations ------------------------------------------------------------------------

    def observation(self, event: Mapping[str, Any]) -> None:
        kind = event["observation"]
        metadata = event.get("tool_call_metadata")
        call_id = metadata.get("tool_call_id") if isinstance(metadata, Mapping) else None
        if not isinstance(call_id, str):
            call_id = self._calls_by_event.get(event.get("cause"))
        if call_id is None:
            if kind in _BOOKKEEPING_OBSERVATIONS:
                self.builder.keep_raw(f"observation/{kind}")
                return
            self._flush()
            text = _observation_text(event)
            self.builder.add(
                ImportedMessage(
                    message={"role": "user", "content": f"[{kind}]\n{text}", "is_meta": True},
                    created_at=parse_time(event.get("timestamp")),
                    original_id=str(event.get("id", "")),
                )
            )
            return
        block: Block = {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": _observation_text(event),
        }
        if kind == "error":
            block["is_error"] = True
        if self._results is None:
            if self._reply is None:
                self._flush()
            self._results = ImportedMessage(
                message={"role": "user", "content": []},
                created_at=parse_time(event.get("timestamp")),
                original_id=str(event.get("id", "")),
            )
        self._results.message["content"].append(block)

    # -- flow ----------------------------------------------------------------------------------

    def _flush(self) -> None:
        if self._reply is not None:
            self.builder.add(self._reply)
        if self._results is not None:
            self.builder.add(self._results)
        self._reply = self._results = None
        self._response_id = None

    def finish(self) -> ImportedSession:
        self._flush()
        return self.builder.finish()


def _from_response(response: Mapping[str, Any], call_id: str) -> tuple[str | None, Any]:
    """(the reply's text, the call's parsed arguments) from a model response, when present."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None, None
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        return None, None
    text = content_text(message.get("content")) or None
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping) and call.get("id") == call_id:
            function = mapping(call.get("function"))
            return text, parse_arguments(function.get("arguments"))
    return text, None


def _observation_text(event: Mapping[str, Any]) -> str:
    content = event.get("content")
    text = content if isinstance(content, str) else content_text(content)
    extras = mapping(event.get("extras"))
    metadata = mapping(extras.get("metadata"))
    suffix = metadata.get("suffix")
    if isinstance(suffix, str) and suffix.strip():
        text = f"{text}{suffix}" if text else suffix.strip()
    if not text.strip():
        text = str(event.get("message") or "")
    return text


def _is_openhands(document: Any) -> bool:
    if isinstance(document, Mapping):
        events = document.get("events")
        return isinstance(events, list) and _is_event_stream(events)
    return isinstance(document, list) and _is_event_stream(document)


def _is_event_stream(items: list[Any]) -> bool:
    events = [item for item in items[:50] if isinstance(item, Mapping)]
    if not events:
        return False
    matching = sum(1 for e in events if "source" in e and ("action" in e or "observation" in e))
    return matching * 2 >= len(events)


def _events_head_score(head: str) -> int:
    if (
        head.startswith("[")
        and '"source"' in head
        and ('"action"' in head or '"observation"' in head)
    ):
        return 4  # after SWE-agent's equal score (rank): the order detection always had
    return 0


IMPORT_FORMAT: Final = ImportFormat(
    name=FORMAT,
    label="OpenHands",
    file_label="OpenHands events",
    detect=_is_openhands,
    guess_head=_events_head_score,
    read_document=parse_openhands,
    rank=20,  # before the message lists: an event list may carry roles
)
