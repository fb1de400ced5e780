"""Message content as display blocks: text, thinking, one-line tool calls with their results.

Content is never trusted: these are plain strings the templates escape. Long texts are cut to
a preview here; the full text loads on demand.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from compaction import SUMMARY_PREFIX, blocks_of, is_meta, is_summary_message, tool_result_text
from sessions_app.selectors.subagents import SubagentLink

__all__ = [
    "OFFLOAD_PATTERN",
    "BlockView",
    "MessageLike",
    "MessageView",
    "SubagentLink",
    "ToolResultView",
    "UsageView",
    "build_message_views",
    "key_argument",
    "offloaded_path",
    "result_text",
    "usage_view",
]

#: Text blocks longer than this are cut in the page (the rest loads on demand).
TEXT_PREVIEW_CHARS: Final = 2000
#: Tool inputs and outputs longer than this are cut inside the expanded tool row.
TOOL_PREVIEW_CHARS: Final = 3000
#: The reference left in an offloaded tool_result (docs/behaviour.md#offloading).
OFFLOAD_PATTERN: Final = re.compile(r"^\s*\[Content offloaded to: (?P<path>[^\]\n]+)\]\s*$")
#: Tool input keys that best say what a call did, most telling first.
_KEY_ARGUMENTS: Final = (
    "file_path",
    "notebook_path",
    "path",
    "filename",
    "command",
    "cmd",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
)
_KEY_ARGUMENT_CHARS: Final = 120


@dataclass(frozen=True)
class ToolResultView:
    """A tool_result: its text (maybe cut), size, error flag and offload reference."""

    tool_use_id: str
    text: str
    chars: int
    lines: int
    is_error: bool
    truncated: bool
    offloaded_to: str | None
    seq: int | None


@dataclass(frozen=True)
class BlockView:
    """One content block ready to display; `kind` picks the template branch."""

    kind: str
    text: str = ""
    chars: int = 0
    truncated: bool = False
    tool_name: str = ""
    tool_id: str = ""
    key_arg: str = ""
    input_json: str = ""
    input_truncated: bool = False
    result: ToolResultView | None = None
    #: The subagent session this tool call (`Agent`/`Task`) started, when known.
    subagent: SubagentLink | None = None


@dataclass(frozen=True)
class UsageView:
    """The token usage the agent (or the proxied API) reported for a message.

    `input_tokens` is everything the model read (cache reads and writes included),
    `cached_tokens` the part read from the prompt cache; `total` is what the post-call check
    compares with the threshold (sessions_app/services/sessions/usage.py, `usage_tokens`).
    """

    input_tokens: int
    output_tokens: int
    cached_tokens: int

    @property
    def total(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


def _count(usage: Mapping[str, Any], *keys: str) -> int:
    total = 0
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            total += int(value)
    return total


def usage_view(usage: Any) -> UsageView | None:
    """A reported usage object (Anthropic, OpenAI chat or Responses, Codex) as a view;
    None when `usage` holds no token count."""
    if not isinstance(usage, Mapping):
        return None
    details = usage.get("input_tokens_details") or usage.get("prompt_tokens_details")
    nested_cached = _count(details, "cached_tokens") if isinstance(details, Mapping) else 0
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        # Anthropic: input_tokens excludes what was read from or written to the cache.
        read = _count(usage, "cache_read_input_tokens")
        inputs = _count(usage, "input_tokens", "cache_creation_input_tokens") + read
        view = UsageView(inputs, _count(usage, "output_tokens"), read)
    elif "prompt_tokens" in usage or "completion_tokens" in usage:
        view = UsageView(
            _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"), nested_cached
        )
    else:
        # Codex and the Responses API: input_tokens already includes the cached part.
        cached = _count(usage, "cached_input_tokens") or nested_cached
        view = UsageView(_count(usage, "input_tokens"), _count(usage, "output_tokens"), cached)
    return view if view.total else None


@dataclass
class MessageView:
    """One message of the history: role, time, tokens and its blocks."""

    seq: int | None
    role: str
    created_at: datetime | None
    token_count: int
    blocks: list[BlockView] = field(default_factory=list)
    is_summary: bool = False
    is_meta: bool = False
    #: Every block is a tool result already shown with its call: nothing left to draw.
    hidden: bool = False
    kind: str = "message"
    #: Unique among the views built together, for element ids: the seq, or `x<index>` for a
    #: message without one (an earlier summary inside a compaction's archive).
    key: str = ""
    #: The usage the agent reported for this message (its `usage`), beside ctxweb's count.
    usage: UsageView | None = None


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def result_text(content: Any) -> str:
    """The readable text of a tool_result's content (string or blocks) for the page.

    `tool_result_text`, with `[image]`/`[document]` for those blocks and the JSON of
    anything else, so nothing stored is hidden.
    """
    if content is not None and not isinstance(content, str | list):
        return json.dumps(content, ensure_ascii=False)
    return tool_result_text(content, _non_text)


def _non_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    return f"[{kind}]" if kind in {"image", "document"} else json.dumps(block, ensure_ascii=False)


def offloaded_path(text: str) -> str | None:
    """The file a seed-003 offload reference points to, or None."""
    match = OFFLOAD_PATTERN.match(text)
    return match.group("path").strip().removeprefix("./") if match else None


def key_argument(tool_input: Any) -> str:
    """The one argument that says what a tool call did: a path, a command, a pattern..."""
    if isinstance(tool_input, str):
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            return _one_line(tool_input)
    if not isinstance(tool_input, Mapping):
        return ""
    for key in _KEY_ARGUMENTS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return _one_line(" ".join(value))
    for value in tool_input.values():
        if isinstance(value, str) and value.strip():
            return _one_line(value)
    return ""


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _KEY_ARGUMENT_CHARS else line[: _KEY_ARGUMENT_CHARS - 1] + "…"


def _result_view(block: Mapping[str, Any], seq: int | None, limit: int) -> ToolResultView:
    text = result_text(block.get("content"))
    shown, truncated = _cut(text, limit)
    return ToolResultView(
        tool_use_id=str(block.get("tool_use_id", "")),
        text=shown,
        chars=len(text),
        lines=text.count("\n") + 1 if text else 0,
        is_error=bool(block.get("is_error")),
        truncated=truncated,
        offloaded_to=offloaded_path(text),
        seq=seq,
    )


def _input_json(tool_input: Any) -> str:
    if isinstance(tool_input, str):
        return tool_input
    return json.dumps(tool_input, ensure_ascii=False, indent=2)


@dataclass(frozen=True)
class _Limits:
    text: int
    tool: int


_PREVIEW = _Limits(TEXT_PREVIEW_CHARS, TOOL_PREVIEW_CHARS)
_FULL = _Limits(sys.maxsize, sys.maxsize)


def _block_view(
    block: Mapping[str, Any],
    results: Mapping[str, ToolResultView],
    seq: int | None,
    limits: _Limits,
    subagents: Mapping[str, SubagentLink],
) -> BlockView:
    kind = str(block.get("type", ""))
    if kind == "text":
        text = str(block.get("text", ""))
        shown, truncated = _cut(text, limits.text)
        return BlockView("text", text=shown, chars=len(text), truncated=truncated)
    if kind == "thinking":
        text = str(block.get("thinking", ""))
        shown, truncated = _cut(text, limits.text)
        return BlockView("thinking", text=shown, chars=len(text), truncated=truncated)
    if kind == "redacted_thinking":
        return BlockView("redacted_thinking", chars=len(str(block.get("data", ""))))
    if kind == "tool_use":
        tool_id = str(block.get("id", ""))
        raw_input = block.get("input", {})
        input_json, input_truncated = _cut(_input_json(raw_input), limits.tool)
        return BlockView(
            "tool_call",
            tool_name=str(block.get("name", "")),
            tool_id=tool_id,
            key_arg=key_argument(raw_input),
            input_json=input_json,
            input_truncated=input_truncated,
            result=results.get(tool_id),
            subagent=subagents.get(tool_id),
        )
    if kind == "tool_result":
        return BlockView("tool_result", result=_result_view(block, seq, limits.tool))
    if kind in {"image", "document"}:
        source = block.get("source")
        media = source.get("media_type", "") if isinstance(source, Mapping) else ""
        return BlockView(kind, text=str(media))
    text, truncated = _cut(json.dumps(block, ensure_ascii=False, indent=2), limits.tool)
    return BlockView("other", text=text, truncated=truncated, tool_name=kind)


def _summary_blocks(content: Any) -> list[dict[str, Any]]:
    """A summary message's blocks, with the recognition prefix line dropped."""
    blocks = blocks_of({"content": content})
    if blocks and blocks[0].get("type") == "text":
        text = str(blocks[0].get("text", ""))
        if text.startswith(SUMMARY_PREFIX):
            blocks = [{"type": "text", "text": text[len(SUMMARY_PREFIX) :].lstrip("\n")}]
            blocks += blocks_of({"content": content})[1:]
    return blocks


class MessageLike(Protocol):
    """What build_message_views needs of a stored message (or anything shaped like one)."""

    @property
    def seq(self) -> int | None: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> Any: ...
    @property
    def extra(self) -> Any: ...
    @property
    def created_at(self) -> datetime | None: ...
    @property
    def token_count(self) -> int: ...


def _pairs(rows: Sequence[MessageLike], full: bool) -> tuple[dict[str, ToolResultView], set[str]]:
    """The tool results of `rows` by the id of the call they answer, and the ids called."""
    results: dict[str, ToolResultView] = {}
    for row in rows:
        for block in blocks_of({"content": row.content}):
            if block.get("type") == "tool_result":
                view = _result_view(block, row.seq, _limits(row, full).tool)
                results.setdefault(view.tool_use_id, view)
    called = {
        str(block.get("id"))
        for row in rows
        for block in blocks_of({"content": row.content})
        if block.get("type") == "tool_use"
    }
    return results, called


def build_message_views(
    rows: Iterable[MessageLike],
    *,
    full: bool = False,
    subagents: Mapping[str, SubagentLink] | None = None,
) -> list[MessageView]:
    """Display views of messages in order, each tool call paired with its result.

    Long texts are cut to a preview unless `full`. A message without a seq (an earlier
    summary in an archive) is never cut: there is no stored message to load the rest from.
    A tool_result whose call is in `rows` is shown inside that call's row; a message left
    with nothing to show is marked hidden. A tool call whose id is a key of `subagents`
    links to the subagent session it started.
    """
    rows = list(rows)
    links = subagents or {}
    results, called = _pairs(rows, full)
    views: list[MessageView] = []
    for index, row in enumerate(rows):
        limits = _limits(row, full)
        as_dict = {**(row.extra or {}), "role": row.role, "content": row.content}
        summary = is_summary_message(as_dict)
        raw_blocks: Sequence[Mapping[str, Any]] = (
            _summary_blocks(row.content) if summary else blocks_of({"content": row.content})
        )
        shown = [
            b
            for b in raw_blocks
            if not (b.get("type") == "tool_result" and str(b.get("tool_use_id")) in called)
        ]
        views.append(
            MessageView(
                seq=row.seq,
                role=row.role,
                created_at=row.created_at,
                token_count=row.token_count,
                blocks=[_block_view(b, results, row.seq, limits, links) for b in shown],
                is_summary=summary,
                is_meta=is_meta(as_dict),
                hidden=bool(raw_blocks) and not shown,
                key=str(row.seq) if row.seq is not None else f"x{index}",
                usage=_reported_usage(row),
            )
        )
    return views


def _reported_usage(row: MessageLike) -> UsageView | None:
    extra = row.extra
    if row.role != "assistant" or not isinstance(extra, Mapping):
        return None
    return usage_view(extra.get("usage"))


def _limits(row: MessageLike, full: bool) -> _Limits:
    return _FULL if full or row.seq is None else _PREVIEW
