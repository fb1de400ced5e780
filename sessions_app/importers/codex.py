"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), streamed line by line.

Each line is `{timestamp, type, payload}` (early rollouts: a header line, then bare response
items). `response_item` payloads are the model's conversation:

- `message` (user / assistant / developer / system) becomes a message; `reasoning` a thinking
  block (summary or raw text; the encrypted content is kept aside);
- `function_call` / `custom_tool_call` / `local_shell_call` / `tool_search_call` become tool_use
  blocks (a JSON-string argument becomes the input object, anything else `{"raw": ...}`), and
  their `*_output` items the matching tool_result blocks (linked by `call_id`);
- server-side `web_search_call` / `image_generation_call` become tool_use blocks too; the
  rollout records no result for them, so they get the marked synthetic result;
- `compacted` lines are imported compaction points: the summary is `message`, and the context
  continues from `replacement_history` when the rollout has one;
- a `compaction` / `compaction_summary` response item (OpenAI Responses server-side
  compaction) is a compaction point whose summary is opaque (encrypted): the marker says so.
  A `compacted` line right after it (no message between) is the same compaction: it gives
  the point its summary text and replacement history instead of a second point. A
  `compacted` line with no `message` whose replacement history holds such an item is a
  remote compaction: its summary is the same opaque marker;
- `event_msg/token_count` gives the last reply's usage, `thread_rolled_back` drops turns from
  the runtime context; every other line is bookkeeping, kept in the raw source and counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from compaction import Block

from .blocks import (
    IMAGE_MISSING_TEXT,
    content_text,
    image_block,
    parse_arguments,
    parse_time,
    short_title,
    text_block,
)
from .builder import SessionBuilder
from .provider_compaction import COMPACTION_BLOCK_TYPES, PROVIDER_TRIGGER, provider_compaction
from .source import Source, parse_json_line
from .types import ImportedCompaction, ImportedMessage, ImportedSession

__all__ = ["parse_codex"]

FORMAT: Final = "codex"
_CALLS: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
_SERVER_CALLS: Final = frozenset({"web_search_call", "image_generation_call"})
_OUTPUTS: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)
#: Response item types an early rollout writes without the `{type, payload}` wrapper.
_BARE_ITEMS: Final = (
    _CALLS | _SERVER_CALLS | _OUTPUTS | COMPACTION_BLOCK_TYPES | {"message", "reasoning"}
)
#: First words of user messages Codex injects itself (instructions, environment, aborts).
_INJECTED: Final = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)


def parse_codex(source: Source) -> ImportedSession:
    """Import one Codex CLI rollout."""
    rollout = _Rollout(SessionBuilder(FORMAT, source_name=source.name))
    for number, raw in source.lines():
        if not raw.strip():
            continue
        record, error = parse_json_line(raw)
        if error:
            rollout.builder.skip(number, error)
        elif not isinstance(record, dict):
            rollout.builder.skip(number, "not a JSON object")
        else:
            rollout.line(number, record, len(raw))
    return rollout.finish()


class _Rollout:
    """State of one rollout being read: the current model turn and its tool results."""

    def __init__(self, builder: SessionBuilder) -> None:
        self.builder = builder
        self.meta: dict[str, Any] = {}
        self.model = ""
        self.title = ""
        self.first_prompt = ""
        self._reply: ImportedMessage | None = None
        self._results: ImportedMessage | None = None
        self._size = 0
        self._calls: set[str] = set()
        self._answered: set[str] = set()
        self._opaque: ImportedCompaction | None = None  # the last provider compaction point
        self._opaque_at = -1

    # -- lines ---------------------------------------------------------------------------

    # `number` is part of the line readers' shared signature (Claude Code's uses it).
    def line(self, number: int, record: dict[str, Any], size: int) -> None:  # noqa: ARG002
        kind = record.get("type")
        payload = record.get("payload")
        when = record.get("timestamp")
        if "payload" not in record:  # an early rollout: bare items after a header line
            if kind in _BARE_ITEMS:
                kind, payload = "response_item", record
            elif "instructions" in record and "id" in record:
                kind, payload = "session_meta", record
        if not isinstance(payload, dict):
            self.builder.keep_raw(str(kind or "unknown"))
            return
        if kind == "response_item":
            self._item(payload, when, size)
        elif kind == "compacted":
            self._compacted(payload, when)
        elif kind == "event_msg":
            self._event(payload)
        elif kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str):
                self.model = payload["model"]
            self.builder.keep_raw("turn_context")
        else:
            self.builder.keep_raw(str(kind or "unknown"))

    def _session_meta(self, payload: Mapping[str, Any]) -> None:
        self.builder.keep_raw("session_meta")
        if self.meta:
            forked = payload.get("forked_from_id")
            if isinstance(forked, str):
                self.builder.session.metadata.setdefault("forked_from_id", forked)
            return
        for key in ("id", "cwd", "originator", "cli_version", "source", "model_provider"):
            if isinstance(payload.get(key), str):
                self.meta[key] = payload[key]
        git = payload.get("git")
        if isinstance(git, Mapping):
            self.meta["git"] = dict(git)

    def _event(self, payload: Mapping[str, Any]) -> None:
        kind = str(payload.get("type") or "unknown")
        self.builder.keep_raw(f"event_msg/{kind}")
        if kind == "token_count" and isinstance(payload.get("info"), Mapping):
            usage = payload["info"].get("last_token_usage")
            if isinstance(usage, Mapping):
                if self._reply is not None:
                    self._reply.usage = dict(usage)
                else:
                    self.builder.set_usage(usage)
        elif kind == "thread_rolled_back":
            turns = payload.get("num_turns")
            self._flush()
            if isinstance(turns, int):
                self.builder.rollback_turns(turns)
        elif kind == "thread_name_updated" and isinstance(payload.get("thread_name"), str):
            self.title = payload["thread_name"]

    # -- response items -----------------------------------------------------------------------

    def _item(self, item: Mapping[str, Any], when: Any, size: int) -> None:
        kind = item.get("type")
        if kind == "message":
            self._message(item, when, size)
        elif kind == "reasoning":
            self._assistant_block(_reasoning(item), item, when, size)
        elif kind in _CALLS or kind in _SERVER_CALLS:
            block = _call(item)
            if kind in _CALLS:
                self._calls.add(block["id"])
            self._assistant_block(block, item, when, size)
        elif kind in _OUTPUTS:
            self._output(item, when, size)
        elif kind in COMPACTION_BLOCK_TYPES:
            self._provider_compaction(item, when)
        elif kind == "agent_message":
            self._flush()
            author = item.get("author") or "another agent"
            blocks = [text_block(f"[message from {author}]"), *_parts(item.get("content"))]
            self.builder.add(
                ImportedMessage(
                    message={"role": "user", "content": blocks, "is_meta": True},
                    created_at=parse_time(when),
                    original_id=str(item.get("id") or ""),
                    extra={"codex_type": "agent_message", "recipient": item.get("recipient")},
                ),
                size,
            )
        else:
            self.builder.keep_raw(f"response_item/{kind or 'unknown'}")

    def _message(self, item: Mapping[str, Any], when: Any, size: int) -> None:
        role = item.get("role")
        blocks = _parts(item.get("content"))
        if role == "assistant":
            for block in blocks:
                self._assistant_block(block, item, when, size)
                size = 0
            return
        pending = self._reply is not None and bool(self._calls - self._answered)
        if role == "user" and pending and self._results is not None:
            self._results.message["content"].extend(blocks)
            return
        self._flush()
        message: dict[str, Any] = {"role": role if isinstance(role, str) else "user"}
        message["content"] = blocks
        text = content_text(blocks).strip()
        if role == "user":
            if text.startswith(_INJECTED):
                message["is_meta"] = True
            elif not self.first_prompt:
                self.first_prompt = text
        self.builder.add(
            ImportedMessage(
                message=message,
                created_at=parse_time(when),
                original_id=str(item.get("id") or ""),
            ),
            size,
        )

    def _assistant_block(self, block: Block, item: Mapping[str, Any], when: Any, size: int) -> None:
        """Add to the current model turn, or start one (a new response follows the results)."""
        open_turn = self._reply is not None and (
            self._results is None or bool(self._calls - self._answered)
        )
        if not open_turn:
            self._flush()
            self._reply = ImportedMessage(
                message={"role": "assistant", "content": []},
                created_at=parse_time(when),
                original_id=str(item.get("id") or ""),
                extra={},
            )
        assert self._reply is not None
        self._reply.message["content"].append(block)
        self._size += size
        if item.get("type") == "reasoning" and item.get("encrypted_content"):
            self._reply.extra.setdefault("encrypted_reasoning", []).append(
                item["encrypted_content"]
            )

    def _output(self, item: Mapping[str, Any], when: Any, size: int) -> None:
        call_id = item.get("call_id")
        block: Block = {
            "type": "tool_result",
            "tool_use_id": call_id if isinstance(call_id, str) else None,
            "content": _output_content(item),
        }
        if isinstance(call_id, str):
            self._answered.add(call_id)
        if self._reply is None:
            self._flush()
        if self._results is None:
            self._results = ImportedMessage(
                message={"role": "user", "content": []}, created_at=parse_time(when)
            )
        self._results.message["content"].append(block)
        self._size += size

    def _provider_compaction(self, item: Mapping[str, Any], when: Any) -> None:
        """A Responses `compaction` item: the server compacted; its summary is opaque."""
        self._flush()
        found = provider_compaction(item, "openai")
        self._opaque = self.builder.mark_provider_compaction(
            found, parse_time(when), str(item.get("id") or "")
        )
        self._opaque_at = self.builder.message_count

    def _compacted(self, payload: Mapping[str, Any], when: Any) -> None:
        self._flush()
        if self._opaque is not None and self._opaque_at == self.builder.message_count:
            self._merge_compacted(self._opaque, payload)  # the same compaction, recorded twice
            return
        history = payload.get("replacement_history")
        replacement = _render_history(history) if isinstance(history, list) else ""
        message = payload.get("message")
        summary = message if isinstance(message, str) else ""
        raw = {k: v for k, v in payload.items() if k not in {"replacement_history", "message"}}
        if isinstance(history, list):
            raw["replacement_history_items"] = len(history)
        remote = _last_compaction_item(history) if not summary.strip() else None
        if remote is not None:  # a remote (server-side) compaction: its summary is opaque
            summary = provider_compaction(remote, "openai").summary
            raw.update(provider="openai", opaque=True)
        self.builder.mark_compaction(
            summary=(summary or replacement).strip(),
            created_at=parse_time(when),
            trigger=PROVIDER_TRIGGER if remote is not None else "",
            context_content=[text_block(replacement)] if replacement.strip() else None,
            original_id=str(payload.get("window_id") or ""),
            raw=raw,
        )

    def _merge_compacted(self, found: ImportedCompaction, payload: Mapping[str, Any]) -> None:
        """Give a provider compaction point the `compacted` line that followed it."""
        history = payload.get("replacement_history")
        replacement = _render_history(history) if isinstance(history, list) else ""
        if replacement.strip():
            found.context_content = [text_block(replacement)]
        message = payload.get("message")
        if isinstance(message, str) and message.strip():
            found.summary = message.strip()
        found.raw["compacted"] = {
            k: v for k, v in payload.items() if k not in {"replacement_history", "message"}
        }
        self._opaque = None

    def _flush(self) -> None:
        if self._reply is not None:
            self.builder.add(self._reply, self._size)
        if self._results is not None:
            self.builder.add(self._results)
        self._reply = self._results = None
        self._size = 0
        self._calls, self._answered = set(), set()

    def finish(self) -> ImportedSession:
        self._flush()
        session = self.builder.finish()
        session.external_id = str(self.meta.get("id", ""))
        session.model = self.model
        session.title = short_title(self.title or self.first_prompt or session.source_name)
        session.metadata.update(self.meta)
        return session


def _parts(content: Any) -> list[Block]:
    """Codex content items (input_text, output_text, input_image, ...) as blocks."""
    if isinstance(content, str):
        return [text_block(content)] if content.strip() else []
    if isinstance(content, Mapping):
        content = [content]
    blocks: list[Block] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in {"input_text", "output_text", "text", "summary_text", "reasoning_text"}:
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                blocks.append(text_block(text))
        elif kind == "input_image":
            blocks.append(image_block(part.get("image_url")))
        elif kind == "refusal":
            blocks.append(text_block(str(part.get("refusal") or "")))
        else:
            blocks.append(dict(part))  # kept aside by the normalizer if not a canonical block
    return blocks


def _reasoning(item: Mapping[str, Any]) -> Block:
    texts = [content_text(_parts(item.get(key))) for key in ("summary", "content")]
    return {"type": "thinking", "thinking": "\n\n".join(t for t in texts if t)}


def _call(item: Mapping[str, Any]) -> Block:
    kind = item.get("type")
    call_id = item.get("call_id") or item.get("id")
    if kind == "custom_tool_call":
        arguments: Any = item.get("input")
    elif kind == "local_shell_call":
        arguments = item.get("action")
    elif kind in _SERVER_CALLS:
        arguments = {k: v for k, v in item.items() if k not in {"type", "id", "status"}}
    else:
        arguments = item.get("arguments")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        name = str(kind).removesuffix("_call") if kind else "unknown_tool"
    return {
        "type": "tool_use",
        "id": call_id if isinstance(call_id, str) and call_id else None,
        "name": name,
        "input": parse_arguments(arguments),
    }


def _output_content(item: Mapping[str, Any]) -> Any:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, Mapping) and "content" in output and len(output) <= 2:
        output = output["content"]  # {"content": ..., "success": ...}
        if isinstance(output, str):
            return output
    if isinstance(output, Mapping | list):
        inner = [b for b in _parts(output) if b.get("type") in {"text", "image"}]
        if inner:
            return inner
    if item.get("type") == "tool_search_output":
        return json.dumps(item.get("tools"), ensure_ascii=False)
    return json.dumps(output, ensure_ascii=False) if output is not None else ""


def _last_compaction_item(history: Any) -> Mapping[str, Any] | None:
    """The last provider compaction item of a replacement history, if any."""
    items = history if isinstance(history, list) else []
    found = [i for i in items if isinstance(i, Mapping) and i.get("type") in COMPACTION_BLOCK_TYPES]
    return found[-1] if found else None


def _render_history(history: list[Any]) -> str:
    """Codex's replacement history as one readable text (the context after compaction)."""
    parts: list[str] = []
    for item in history:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            text = content_text(_parts(item.get("content"))).strip()
            if any(
                isinstance(p, Mapping) and p.get("type") == "input_image"
                for p in item.get("content") or []
            ):
                text = f"{text}\n{IMAGE_MISSING_TEXT}".strip()
            if text:
                parts.append(f"[{item.get('role', 'user')}]\n{text}")
        elif item.get("type") in COMPACTION_BLOCK_TYPES:
            parts.append(provider_compaction(item, "openai").summary)
    return "\n\n".join(parts)
