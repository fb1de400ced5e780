"""Claude Code session files (`~/.claude/projects/<project>/<session>.jsonl`).

The file is read twice, line by line: first a small index (`claude_code_graph`) decides which
lines form the conversation; then those lines are read again and turned into messages:

- assistant lines of one API response (same `message.id`, one content block each, usage on
  every line) become one message, with the usage of the response counted once;
- user lines with `tool_result` blocks become the user message answering that response, with
  each tool's `toolUseResult` data kept in `extra["tool_use_results"]`;
- `isMeta` is kept on the message as `is_meta`;
- `system/compact_boundary` plus its `isCompactSummary` line become an imported compaction
  point (trigger, preTokens/postTokens and the rest of `compactMetadata` kept);
- `summary` / `custom-title` / `ai-title` lines give the title; every other line (attachments,
  hooks, snapshots, progress, system notices, abandoned branches) is kept only in the raw
  source and counted;
- subagents, from `isSidechain` lines or from `subagents/agent-<id>.jsonl` (+ `.meta.json`)
  beside the session file, become their own sessions, linked to the Task/Agent tool call
  that started them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from compaction import Block

from .blocks import content_text, parse_time, short_title
from .builder import SessionBuilder
from .claude_code_graph import (
    ASSISTANT,
    BOUNDARY,
    OTHER,
    PROMPT,
    RESULT,
    SUMMARY,
    Graph,
)
from .source import Source, load_json, open_source, parse_json_line
from .types import ImportedCompaction, ImportedMessage, ImportedSession

__all__ = ["find_subagent_files", "parse_claude_code"]

FORMAT: Final = "claude_code"
SPAWN_TOOLS: Final = frozenset({"Task", "Agent"})
_AGENT_ID_TEXT = re.compile(r"agentId:\s*([A-Za-z0-9_-]+)")
_AGENT_FILE = re.compile(r"^agent-(.+)\.jsonl$")


def parse_claude_code(source: Source, *, subagents: bool = True) -> ImportedSession:
    """Import one Claude Code session file, with its subagents when `subagents` is true."""
    main = _FileImport(source).run()
    main.source_path = str(source.path or "")
    if subagents and source.path is not None:
        _attach_agent_files(main, source.path)
    return main


# -- one file ------------------------------------------------------------------------------


@dataclass
class _Header:
    """What the bookkeeping lines say about the session."""

    session_id: str = ""
    agent_id: str = ""
    custom_title: str = ""
    summary_title: str = ""
    ai_title: str = ""
    values: dict[str, Any] = field(default_factory=dict)

    def note(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "summary" and isinstance(record.get("summary"), str):
            self.summary_title = record["summary"]
        elif kind == "custom-title" and isinstance(record.get("customTitle"), str):
            self.custom_title = record["customTitle"]
        elif kind == "ai-title" and isinstance(record.get("aiTitle"), str):
            self.ai_title = record["aiTitle"]
        if not self.session_id and isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        conversational = kind in {"user", "assistant"}
        if conversational and not self.agent_id and isinstance(record.get("agentId"), str):
            self.agent_id = record["agentId"]
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version")):
            if isinstance(record.get(key), str) and record[key]:
                self.values[name] = record[key]


class _FileImport:
    """Pass 1 (index), resolution, pass 2 (messages) for one file."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.graph = Graph()
        self.header = _Header()
        self.by_line: dict[int, int] = {}

    def run(self) -> ImportedSession:
        main = SessionBuilder(FORMAT, source_name=self.source.name)
        self._index(main)
        self.graph.resolve()
        threads = [_Thread(main, self)]
        threads += [
            _Thread(SessionBuilder(FORMAT, source_name=self.source.name), self)
            for _ in range(1, self.graph.threads)
        ]
        for index, node in enumerate(self.graph.nodes):
            if node.kind == BOUNDARY and node.segment is not None:
                threads[node.thread].watch(self.graph.preserved(index))
        self._read_messages(threads, main)
        session = threads[0].finish()
        self._describe(session, threads[0])
        for thread in threads[1:]:
            child = thread.finish()
            child.title = short_title(thread.first_prompt, 200)
            child.external_id = thread.agent_id
            child.metadata["inline_sidechain"] = True
            _link_inline(child, thread, threads[0], session)
        return session

    def _index(self, builder: SessionBuilder) -> None:
        for number, raw in self.source.lines():
            if not raw.strip():
                continue
            record, error = parse_json_line(raw)
            if error:
                builder.skip(number, error)
                continue
            if not isinstance(record, dict):
                builder.skip(number, "not a JSON object")
                continue
            self.header.note(record)
            kind = record.get("type")
            if kind in {"user", "assistant"} and not isinstance(record.get("message"), Mapping):
                builder.skip(number, f"{kind} line without a message object")
                continue
            if isinstance(record.get("uuid"), str) or kind in {"user", "assistant"}:
                self.by_line[number] = len(self.graph.nodes)
                if self.graph.add(number, record).kind != OTHER:
                    continue
            builder.keep_raw(_raw_kind(record))

    def _read_messages(self, threads: list[_Thread], main: SessionBuilder) -> None:
        nodes = self.graph.nodes
        for number, raw in self.source.lines():
            index = self.by_line.get(number)
            if index is None or nodes[index].kind == OTHER:
                continue  # bookkeeping: counted while indexing
            if not self.graph.live(index):
                main.keep_raw("abandoned_branch")
                continue
            record, _ = parse_json_line(raw)
            threads[nodes[index].thread].feed(index, record, len(raw))

    def _describe(self, session: ImportedSession, thread: _Thread) -> None:
        header = self.header
        session.external_id = header.session_id or header.agent_id
        session.title = short_title(
            header.custom_title or header.summary_title or header.ai_title or thread.first_prompt,
            200,
        )
        session.model = thread.model
        session.metadata.update(header.values)
        if header.session_id:
            session.metadata["session_id"] = header.session_id
        if header.agent_id:
            session.metadata["agent_id"] = header.agent_id
        session.metadata["abandoned_lines"] = len(self.graph.dead)
        if thread.spawned:
            session.metadata["spawned_agents"] = dict(thread.spawned)


def _raw_kind(record: Any) -> str:
    if not isinstance(record, Mapping):
        return "unknown"
    kind = str(record.get("type") or "unknown")
    subtype = record.get("subtype")
    if kind == "attachment" and isinstance(record.get("attachment"), Mapping):
        subtype = record["attachment"].get("type")
    return f"{kind}/{subtype}" if isinstance(subtype, str) and subtype else kind


# -- one thread: lines to messages --------------------------------------------------------


class _Thread:
    """Turns one thread's live lines into messages, merging lines of one API response."""

    def __init__(self, builder: SessionBuilder, file: _FileImport) -> None:
        self.builder = builder
        self.file = file
        self.first_prompt = ""
        self.model = ""
        self.agent_id = ""
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
        node = self.file.graph.nodes[index]
        if node.agent_id and not self.agent_id:
            self.agent_id = node.agent_id
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
            self.first_prompt = content_text(item.message["content"]).strip()
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
        node = self.file.graph.nodes[index]
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


# -- subagents ------------------------------------------------------------------------------


def _link_inline(
    child: ImportedSession, thread: _Thread, main_thread: _Thread, main: ImportedSession
) -> None:
    """Attach an inline sidechain to the main session and the Task call whose prompt it got."""
    prompt = thread.first_prompt.strip()
    child.parent_tool_use_id = main_thread.spawn_prompts.get(prompt, "")
    main.subagents.append(child)


def find_subagent_files(path: Path, session_id: str) -> list[Path]:
    """Subagent transcripts of the session file at `path`, sorted by name.

    Looked for in `<session>/subagents/` (Claude Code's layout), in `subagents/` beside the
    file and, for older versions, `agent-*.jsonl` beside it; the last two only when their
    lines name this session.
    """
    found: dict[Path, None] = {}
    own_dir = path.with_suffix("") / "subagents"
    for candidate in sorted(own_dir.glob("agent-*.jsonl")):
        found[candidate] = None
    for folder in (path.parent / "subagents", path.parent):
        for candidate in sorted(folder.glob("agent-*.jsonl")):
            if candidate != path and _session_of(candidate) == session_id and session_id:
                found[candidate] = None
    return list(found)


def _session_of(path: Path) -> str:
    try:
        with open(path, "rb") as file:
            for _, raw in zip(range(20), file, strict=False):
                record, error = parse_json_line(raw.rstrip(b"\r\n"))
                if not error and isinstance(record, dict):
                    value = record.get("sessionId")
                    if isinstance(value, str) and value:
                        return value
    except OSError:
        return ""
    return ""


def _agent_meta(path: Path) -> dict[str, Any]:
    meta_path = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
    try:
        value = load_json(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _attach_agent_files(main: ImportedSession, path: Path) -> None:
    """Import the session's subagent files and link each to the tool call that started it."""
    agents: dict[str, ImportedSession] = {}
    for agent_path in find_subagent_files(path, str(main.metadata.get("session_id", ""))):
        with open_source(agent_path) as source:
            agent = _FileImport(source).run()
        agent.source_path = str(agent_path)
        match = _AGENT_FILE.match(agent_path.name)
        agent_id = match.group(1) if match else agent.external_id
        meta = _agent_meta(agent_path)
        agent.external_id = agent_id
        agent.metadata["agent_id"] = agent_id
        if meta:
            agent.metadata["agent"] = meta
            description = meta.get("description")
            if isinstance(description, str) and description.strip():
                agent.title = short_title(description, 200)
        agents[agent_id] = agent
    linked: set[str] = set()
    for owner in [main, *agents.values()]:
        spawned = owner.metadata.get("spawned_agents", {})
        for agent_id, tool_id in spawned.items():
            child = agents.get(agent_id)
            if child is None or agent_id in linked or child is owner:
                continue
            if any(s is child for s in _ancestors(owner, main)):
                continue
            child.parent_tool_use_id = tool_id
            owner.subagents.append(child)
            linked.add(agent_id)
    for agent_id, agent in agents.items():
        if agent_id not in linked:
            main.subagents.append(agent)


def _ancestors(session: ImportedSession, root: ImportedSession) -> Iterator[ImportedSession]:
    """`session` and the sessions above it under `root` (empty when not under root)."""
    path: list[ImportedSession] = []

    def visit(node: ImportedSession) -> bool:
        path.append(node)
        if node is session or any(visit(child) for child in node.subagents):
            return True
        path.pop()
        return False

    if visit(root):
        yield from path
    else:
        yield session
