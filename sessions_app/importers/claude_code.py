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
- `summary` / `custom-title` / `ai-title` lines give the title; metadata records (`cost-state`,
  `api-request`, `last-prompt`, `tools-used`, `queue-operation`, ...) give session metadata
  (claude_code_records.py); every line is counted by type (`metadata["record_types"]`), and
  every line that is not a message (attachments, hooks, snapshots, progress, system notices,
  metadata records, abandoned branches) is kept only in the raw source and counted;
- an assistant message's `compaction` block (Anthropic server-side compaction) is a compaction
  point whose summary is the block's `content` (provider_compaction.py);
- subagents, from `isSidechain` lines or from `subagents/agent-<id>.jsonl` (+ `.meta.json`)
  beside the session file, become their own sessions, linked to the Task/Agent tool call
  that started them.

The modules: this one reads the file (two passes) and describes the session;
claude_code_graph.py decides which lines are live; claude_code_thread.py turns one
thread's lines into messages and compaction points; claude_code_agents.py finds and links
subagent files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .blocks import short_title
from .builder import SessionBuilder
from .claude_code_agents import attach_agent_files, find_subagent_files
from .claude_code_graph import BOUNDARY, OTHER, Graph
from .claude_code_records import RecordNotes
from .claude_code_thread import Thread
from .registry import ImportFormat
from .source import Source, parse_json_line
from .types import ImportedSession

__all__ = ["CONTINUES", "IMPORT_FORMAT", "find_subagent_files", "parse_claude_code"]

FORMAT: Final = "claude_code"
#: Metadata of an inline subagent read from the middle of a growing file: the uuid (read
#: before, so stored in a message of that subagent) its first line here hangs from.
CONTINUES: Final = "continues_uuid"


def parse_claude_code(source: Source, *, subagents: bool = True) -> ImportedSession:
    """Import one Claude Code session file, with its subagents when `subagents` is true."""
    main = _FileImport(source).run()
    main.source_path = str(source.path or "")
    if subagents and source.path is not None:
        attach_agent_files(main, source.path, _read_file)
    return main


def _read_file(source: Source) -> ImportedSession:
    """One file (a subagent transcript) without looking for further subagent files."""
    return _FileImport(source).run()


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
        self.records = RecordNotes()
        self.by_line: dict[int, int] = {}

    def run(self) -> ImportedSession:
        main = SessionBuilder(FORMAT, source_name=self.source.name)
        self._index(main)
        self.graph.resolve()
        threads = [Thread(main, self.graph)]
        threads += [
            Thread(SessionBuilder(FORMAT, source_name=self.source.name), self.graph)
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
            # Its identity, the same in every read of the file: the agent id (Claude Code
            # 2.x) or the uuid of its first line (1.x writes none).
            child.external_id = thread.agent_id or thread.root_uuid
            child.metadata["inline_sidechain"] = True
            if thread.root_parent_uuid and not self.graph.knows(thread.root_parent_uuid):
                # A part of a growing file (the watcher): it goes on from a line read before.
                child.metadata[CONTINUES] = thread.root_parent_uuid
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
            self.records.note(record)
            kind = record.get("type")
            if kind in {"user", "assistant"} and not isinstance(record.get("message"), Mapping):
                builder.skip(number, f"{kind} line without a message object")
                continue
            if isinstance(record.get("uuid"), str) or kind in {"user", "assistant"}:
                self.by_line[number] = len(self.graph.nodes)
                if self.graph.add(number, record).kind != OTHER:
                    continue
            builder.keep_raw(_raw_kind(record))

    def _read_messages(self, threads: list[Thread], main: SessionBuilder) -> None:
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

    def _describe(self, session: ImportedSession, thread: Thread) -> None:
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
        self.records.describe(session)


def _raw_kind(record: Any) -> str:
    if not isinstance(record, Mapping):
        return "unknown"
    kind = str(record.get("type") or "unknown")
    subtype = record.get("subtype")
    if kind == "attachment" and isinstance(record.get("attachment"), Mapping):
        subtype = record["attachment"].get("type")
    return f"{kind}/{subtype}" if isinstance(subtype, str) and subtype else kind


def _link_inline(
    child: ImportedSession, thread: Thread, main_thread: Thread, main: ImportedSession
) -> None:
    """Attach an inline sidechain to the main session and the Task call whose prompt it got."""
    prompt = thread.first_prompt.strip()
    child.parent_tool_use_id = main_thread.spawn_prompts.get(prompt, "")
    main.subagents.append(child)


#: Line types of a Claude Code session file (a line of one of them is recognised even alone).
_CLAUDE_TYPES: Final = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "attachment",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "permission-mode",
        "custom-title",
        "ai-title",
        "last-prompt",
        "cost-state",
        "api-request",
        "api-request-blob",
        "api-request-shape",
        "tools-used",
        "mode",
        "agent-name",
        "worktree-state",
    }
)
_CLAUDE_KEYS: Final = ("parentUuid", "sessionId", "leafUuid", "isSidechain")


def _is_claude_line(value: Mapping[str, Any]) -> bool:
    """Whether a parsed line is Claude Code's: its keys, or one of its line types."""
    kind = value.get("type")
    if any(key in value for key in _CLAUDE_KEYS):
        return True
    if (kind in _CLAUDE_TYPES and "message" in value) or kind in {"summary", "custom-title"}:
        return True
    return kind in _CLAUDE_TYPES and "role" not in value


IMPORT_FORMAT: Final = ImportFormat(
    name=FORMAT,
    label="Claude Code",
    file_label="Claude Code JSONL",
    aliases=("claude-code", "claude"),
    detect=_is_claude_line,
    read_lines=parse_claude_code,
    rank=20,  # after Codex on each line
)
