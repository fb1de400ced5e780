"""One thread of a Claude Code file: its live lines turned into messages.

Part of the Claude Code importer (sessions_app/importers/claude_code.py, which reads the
file and decides which lines are live with claude_code_graph.py). A thread merges the
assistant lines of one API response into one message, gathers the tool results answering
it into one user message, and turns compaction boundaries and their summaries into
imported compaction points.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from compaction import Block

from .blocks import content_text, parse_time, prompt_text
from .builder import SessionBuilder
from .claude_code_graph import ASSISTANT, BOUNDARY, PROMPT, RESULT, SUMMARY, Graph
from .types import ImportedCompaction, ImportedMessage, ImportedSession

__all__ = ["SPAWN_TOOLS", "Thread"]

#: The tools that start a subagent (their `prompt` input is the subagent's first prompt).
SPAWN_TOOLS: Final = frozenset({"Task", "Agent"})
_AGENT_ID_TEXT = re.compile(r"agentId:\s*([A-Za-z0-9_-]+)")


class Thread:
    """Turns one thread's live lines into messages, merging lines of one API response."""

    def __init__(self, builder: SessionBuilder, graph: Graph) -> None:
        self.builder = builder
        self.graph = graph
        self.first_prompt = ""
        self.model = ""
        self.agent_id = ""
        #: The uuid of the thread's first line and the uuid that line hangs from.
        self.root_uuid = ""
        self.root_parent_uuid = ""
        self.spawned: dict[str, str] = {}
        self.spawn_prompts: dict[str, str] = {}
        self._reply: ImportedMessage | None = None
        self._reply_mid: str | None = None
        self._reply_size = 0
        self._calls: set[str] = set()
        self._answered: set[str] = set()
        self._results: ImportedMessage | None = None
        self._results_size = 0
        self._boundary: tuple[int, Mapping[str, Any]] | None = None
        self._late_summaries: dict[int, ImportedCompaction] = {}
        self._preserved: set[int] = set()  # lines a later boundary keeps after its summary
        self._line_kept = False
        self._reply_kept = self._results_kept = False
        self._trailing_kept = 0  # newest messages made only of such lines, in a row
        self._kept_at_boundary = 0

    def feed(self, index: int, record: Mapping[str, Any], size: int) -> None:
        node = self.graph.nodes[index]
        if node.agent_id and not self.agent_id:
            self.agent_id = node.agent_id
        if not self.root_uuid and isinstance(record.get("uuid"), str):
            self.root_uuid = record["uuid"]
            parent = record.get("parentUuid")
            self.root_parent_uuid = parent if isinstance(parent, str) else ""
        self._line_kept = index in self._preserved
        if node.kind == BOUNDARY:
            self._flush()
            self._compaction_boundary(index, record)
        elif node.kind == SUMMARY:
            self._flush()
            self._compaction_summary(index, record)
        elif node.kind == ASSISTANT:
            self._assistant(record, size)
        elif node.kind == RESULT:
            self._user(record, size, results=True)
        elif node.kind == PROMPT:
            self._user(record, size, results=False)

    def finish(self) -> ImportedSession:
        self._flush()
        self._emit_boundary(None)
        return self.builder.finish()

    # assistant lines ---------------------------------------------------------------------

    def _assistant(self, record: Mapping[str, Any], size: int) -> None:
        message = record["message"]
        mid = message.get("id") if isinstance(message.get("id"), str) else None
        blocks = _blocks(message.get("content"))
        if self._reply is None or mid is None or mid != self._reply_mid:
            self._flush()
            self._emit_boundary(None)
            self._reply = ImportedMessage(
                message={"role": "assistant", "content": []},
                created_at=parse_time(record.get("timestamp")),
                original_id=mid or str(record.get("uuid") or ""),
                extra={"uuids": []},
            )
            self._reply_mid = mid
            self._reply_size = 0
            self._reply_kept = self._line_kept
        reply = self._reply
        reply.message["content"].extend(blocks)
        reply.extra["uuids"].append(record.get("uuid"))
        self._reply_size += size
        if isinstance(message.get("usage"), Mapping):
            reply.usage = dict(message["usage"])  # repeated on every line: the last one wins
        for key in ("model", "stop_reason"):
            if isinstance(message.get(key), str):
                reply.extra[key] = message[key]
        if isinstance(record.get("requestId"), str):
            reply.extra["request_id"] = record["requestId"]
        if record.get("isApiErrorMessage"):
            reply.extra["api_error"] = True
        model = message.get("model")
        if isinstance(model, str) and model and not model.startswith("<"):
            self.model = model
        for block in blocks:
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self._calls.add(block["id"])
                self._note_spawn(block)

    def _note_spawn(self, block: Mapping[str, Any]) -> None:
        value = block.get("input")
        if block.get("name") in SPAWN_TOOLS and isinstance(value, Mapping):
            prompt = value.get("prompt")
            if isinstance(prompt, str) and prompt.strip():
                self.spawn_prompts[prompt.strip()] = str(block["id"])

    # user lines --------------------------------------------------------------------------

    def _user(self, record: Mapping[str, Any], size: int, *, results: bool) -> None:
        message = record["message"]
        content = message.get("content")
        pending = self._reply is not None and bool(self._calls - self._answered)
        if self._reply is not None and (results or pending):
            self._add_to_results(record, content, size)
            return
        self._flush()
        self._emit_boundary(None)
        item = ImportedMessage(
            message={"role": "user", "content": content},
            created_at=parse_time(record.get("timestamp")),
            original_id=str(record.get("uuid") or ""),
            extra={"uuids": [record.get("uuid")]},
        )
        if results:
            item.message["content"] = self._result_blocks(record, content, item)
        self._decorate_user(record, item, prompt=not results)
        self._add(item, size, kept=self._line_kept)

    def _add_to_results(self, record: Mapping[str, Any], content: Any, size: int) -> None:
        if self._results is None:
            self._results = ImportedMessage(
                message={"role": "user", "content": []},
                created_at=parse_time(record.get("timestamp")),
                original_id=str(record.get("uuid") or ""),
                extra={"uuids": []},
            )
            self._results_size = 0
            if record.get("isMeta"):
                self._results.message["is_meta"] = True
            self._results_kept = self._line_kept
        results = self._results
        results.message["content"].extend(self._result_blocks(record, content, results))
        results.extra["uuids"].append(record.get("uuid"))
        self._results_size += size
        if not record.get("isMeta"):
            results.message.pop("is_meta", None)

    def _result_blocks(
        self, record: Mapping[str, Any], content: Any, item: ImportedMessage
    ) -> list[Block]:
        blocks = _blocks(content)
        source_id = record.get("sourceToolUseID")
        data = record.get("toolUseResult")
        for block in blocks:
            if block.get("type") != "tool_result":
                continue
            tool_id = block.get("tool_use_id")
            if not isinstance(tool_id, str) or not tool_id:
                if isinstance(source_id, str) and source_id:
                    block["tool_use_id"] = tool_id = source_id
                else:
                    tool_id = None
            if tool_id:
                self._answered.add(tool_id)
            if data is not None:
                item.extra.setdefault("tool_use_results", {})[tool_id or "?"] = data
            self._note_agent(tool_id, data, block)
        return blocks

    def _note_agent(self, tool_id: str | None, data: Any, block: Mapping[str, Any]) -> None:
        if not tool_id:
            return
        agent_id = data.get("agentId") if isinstance(data, Mapping) else None
        if not isinstance(agent_id, str):
            match = _AGENT_ID_TEXT.search(content_text(block.get("content")))
            agent_id = match.group(1) if match else None
        if agent_id and agent_id not in self.spawned:
            self.spawned[agent_id] = tool_id

    def _decorate_user(
        self, record: Mapping[str, Any], item: ImportedMessage, *, prompt: bool
    ) -> None:
        if record.get("isMeta"):
            item.message["is_meta"] = True
        elif prompt and not self.first_prompt:
            self.first_prompt = prompt_text(item.message["content"])
        for key in ("isVisibleInTranscriptOnly", "isCompactSummary"):
            if record.get(key):
                item.extra[key] = True

    def _flush(self) -> None:
        if self._reply is not None:
            self._add(self._reply, self._reply_size, kept=self._reply_kept)
        if self._results is not None:
            self._add(self._results, self._results_size, kept=self._results_kept)
        self._reply = self._results = None
        self._reply_mid = None
        self._calls, self._answered = set(), set()

    def _add(self, item: ImportedMessage, size: int, *, kept: bool) -> None:
        self.builder.add(item, size)
        self._trailing_kept = self._trailing_kept + 1 if kept else 0

    def watch(self, preserved: set[int]) -> None:
        """Lines that a boundary of this thread keeps in the context after its summary."""
        self._preserved |= preserved

    # compactions -------------------------------------------------------------------------

    def _compaction_boundary(self, index: int, record: Mapping[str, Any]) -> None:
        self._emit_boundary(None)
        node = self.graph.nodes[index]
        self._boundary = (node.claims, record)
        self._kept_at_boundary = self._trailing_kept if node.segment else 0
        if node.claims < 0:
            self._emit_boundary(None)

    def _compaction_summary(self, index: int, record: Mapping[str, Any]) -> None:
        if self._boundary is not None and self._boundary[0] == index:
            self._emit_boundary(record)
            return
        late = self._late_summaries.pop(index, None)
        if late is not None:  # its boundary was closed by messages in between
            content = record["message"].get("content")
            late.summary = content_text(content).strip()
            late.context_content = content if late.summary else None
            late.raw["summary_uuid"] = record.get("uuid")
            return
        self._emit_boundary(None)
        self._boundary = (-1, {})
        self._emit_boundary(record)  # a summary with no boundary (older Claude Code)

    def _emit_boundary(self, summary: Mapping[str, Any] | None) -> None:
        if self._boundary is None:
            return
        claimed, boundary = self._boundary
        self._boundary = None
        metadata = boundary.get("compactMetadata")
        metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        content = summary["message"].get("content") if summary else None
        raw: dict[str, Any] = {"compactMetadata": metadata}
        for key in ("logicalParentUuid", "content", "level"):
            if key in boundary:
                raw[key] = boundary[key]
        if summary is not None:
            raw["summary_uuid"] = summary.get("uuid")
        compaction = self.builder.mark_compaction(
            summary=content_text(content).strip(),
            created_at=parse_time(boundary.get("timestamp") or (summary or {}).get("timestamp")),
            trigger=str(metadata.get("trigger") or boundary.get("trigger") or ""),
            pre_tokens=_int(metadata.get("preTokens")),
            post_tokens=_int(metadata.get("postTokens")),
            original_id=str(boundary.get("uuid") or (summary or {}).get("uuid") or ""),
            context_content=content if content_text(content).strip() else None,
            raw=raw,
            keep_last=self._kept_at_boundary,
        )
        self._kept_at_boundary = 0
        if summary is None and claimed >= 0:
            self._late_summaries[claimed] = compaction


def _blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    if isinstance(content, list):
        return [dict(b) if isinstance(b, Mapping) else b for b in content]
    return []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
