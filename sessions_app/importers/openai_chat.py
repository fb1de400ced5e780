"""OpenAI chat message arrays: a list of messages or a request body `{"messages": [...]}`.

`tool_calls` (JSON-string arguments) become tool_use blocks, `role: "tool"` messages become
tool_result blocks in one user message, `reasoning_content` becomes a thinking block, and
content parts (text, image_url) become blocks. An OpenAI Responses `compaction` item (no
role, `encrypted_content`) among the messages is a compaction point with an opaque summary
(provider_compaction.py). Also used for SWE-agent histories.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
from .chat_detect import chat_format, openai_head_score
from .errors import TranscriptError
from .provider_compaction import COMPACTION_BLOCK_TYPES, provider_compaction
from .registry import ImportFormat
from .types import ImportedMessage, ImportedSession

__all__ = ["IMPORT_FORMAT", "OpenAIConverter", "parse_openai"]

FORMAT: Final = "openai"
#: Message keys that are part of the chat format (everything else is kept as import data).
_KNOWN_KEYS: Final = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "function_call", "reasoning_content"}
)


def parse_openai(document: Any, name: str = "") -> ImportedSession:
    """Import an OpenAI chat array or request body."""
    if isinstance(document, Mapping) and isinstance(document.get("messages"), list):
        messages = document["messages"]
        model = document.get("model")
    elif isinstance(document, list):
        messages, model = document, None
    else:
        raise TranscriptError("an OpenAI chat import needs a list of messages or {messages: [...]}")
    builder = SessionBuilder(FORMAT, source_name=name)
    converter = OpenAIConverter(builder)
    converter.feed(messages)
    session = converter.finish()
    if isinstance(model, str):
        session.model = model
    session.title = short_title(converter.first_prompt or name)
    return session


class OpenAIConverter:
    """Feeds OpenAI-style messages to a SessionBuilder, grouping tool results."""

    def __init__(self, builder: SessionBuilder) -> None:
        self.builder = builder
        self.first_prompt = ""
        self._results: ImportedMessage | None = None
        self._legacy_calls = 0

    def feed(self, messages: Iterable[Any]) -> None:
        """Convert each message in order; a malformed one is reported as skipped."""
        for number, raw in enumerate(messages, start=1):
            if not isinstance(raw, Mapping):
                self.builder.skip(number, f"messages[{number - 1}] is not an object")
                continue
            role = raw.get("role")
            if role is None and raw.get("type") in COMPACTION_BLOCK_TYPES:
                self._flush()  # an OpenAI Responses compaction item: opaque summary
                self.builder.mark_provider_compaction(
                    provider_compaction(raw, "openai"),
                    parse_time(raw.get("timestamp") or raw.get("created_at")),
                    str(raw.get("id") or ""),
                )
                continue
            if role in {"tool", "function"}:
                self._tool_result(raw, number)
                continue
            if not isinstance(role, str):
                self.builder.skip(number, f"messages[{number - 1}] has no role")
                continue
            item = self.convert(raw, number)
            if role == "user" and not item.message.get("is_meta") and not self.first_prompt:
                self.first_prompt = content_text(item.message["content"]).strip()
            if role == "user" and self._results is not None:
                # A user message right after tool results is part of the same user turn.
                self._results.message["content"].extend(content_blocks(item.message["content"]))
                self._flush()
                continue
            self._flush()
            self.builder.add(item)

    def finish(self) -> ImportedSession:
        """Flush the pending tool results and return the built session."""
        self._flush()
        return self.builder.finish()

    def convert(self, raw: Mapping[str, Any], number: int) -> ImportedMessage:
        """One non-tool message as an ImportedMessage."""
        role = str(raw["role"])
        blocks: list[Block] = []
        reasoning = raw.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning.strip():
            blocks.append({"type": "thinking", "thinking": reasoning})
        content: Any = parts_to_content(raw.get("content"))
        calls = self._tool_calls(raw)
        if blocks or calls:
            blocks.extend(content_blocks(content))
            blocks.extend(calls)
            content = blocks
        extra = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS | {"is_meta"}}
        message: dict[str, Any] = {"role": role, "content": content}
        if raw.get("is_meta"):
            message["is_meta"] = True
        return ImportedMessage(
            message=message,
            created_at=parse_time(raw.get("timestamp") or raw.get("created_at")),
            original_id=str(raw.get("id") or ""),
            extra={"source": extra, "index": number - 1} if extra else {"index": number - 1},
        )

    def _tool_calls(self, raw: Mapping[str, Any]) -> list[Block]:
        calls: list[Block] = []
        tool_calls = raw.get("tool_calls")
        if isinstance(tool_calls, list):
            for call in tool_calls:
                if not isinstance(call, Mapping):
                    continue
                function = mapping(call.get("function"))
                calls.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id") if isinstance(call.get("id"), str) else None,
                        "name": function.get("name") or call.get("name") or "unknown_tool",
                        "input": parse_arguments(function.get("arguments")),
                    }
                )
        legacy = raw.get("function_call")
        if isinstance(legacy, Mapping):
            self._legacy_calls += 1
            calls.append(
                {
                    "type": "tool_use",
                    "id": f"function_call_{self._legacy_calls}",
                    "name": legacy.get("name") or "unknown_tool",
                    "input": parse_arguments(legacy.get("arguments")),
                }
            )
        return calls

    def _tool_result(self, raw: Mapping[str, Any], number: int) -> None:
        tool_id = raw.get("tool_call_id")
        if not isinstance(tool_id, str):
            ids = raw.get("tool_call_ids")
            tool_id = ids[0] if isinstance(ids, list) and ids else None
        if tool_id is None and raw.get("role") == "function":
            tool_id = f"function_call_{self._legacy_calls}"
        block: Block = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": result_content(raw.get("content")),
        }
        if self._results is None:
            self._results = ImportedMessage(
                message={"role": "user", "content": []},
                created_at=parse_time(raw.get("timestamp") or raw.get("created_at")),
                extra={"index": number - 1},
            )
        self._results.message["content"].append(block)
        extra = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS and k != "tool_call_ids"}
        if extra:
            self._results.extra.setdefault("sources", []).append(extra)

    def _flush(self) -> None:
        if self._results is not None:
            self.builder.add(self._results)
            self._results = None


def parts_to_content(content: Any) -> Any:
    """Chat content (string, parts or null) as canonical content (string or blocks)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    blocks: list[Block] = []
    for part in content:
        if isinstance(part, str):
            blocks.append(text_block(part))
        elif isinstance(part, Mapping):
            blocks.append(_part_block(part))
    return blocks


def _part_block(part: Mapping[str, Any]) -> Block:
    kind = part.get("type")
    if kind in {"text", "input_text", "output_text"}:
        block = {k: v for k, v in part.items() if k != "type"}
        return {"type": "text", **block, "text": str(part.get("text") or "")}
    if kind == "refusal":
        return text_block(str(part.get("refusal") or ""))
    if kind in {"image_url", "input_image"}:
        return image_block(part.get("image_url"))
    return dict(part)  # anything else: the normalizer keeps it aside if unsupported


def content_blocks(content: Any) -> list[Block]:
    """Canonical content as a list of blocks (an empty string gives none)."""
    if isinstance(content, str):
        return [text_block(content)] if content.strip() else []
    return list(content) if isinstance(content, list) else []


def result_content(content: Any) -> Any:
    """A tool message's content as tool_result content (text or text/image blocks)."""
    return parts_to_content(content)


def _is_openai(document: Any) -> bool:
    return chat_format(document) == "openai"


IMPORT_FORMAT: Final = ImportFormat(
    name=FORMAT,
    label="OpenAI chat",
    file_label="OpenAI chat messages",
    aliases=("openai_chat", "chat"),
    detect=_is_openai,
    guess_head=openai_head_score,
    read_document=parse_openai,
    rank=30,
)
