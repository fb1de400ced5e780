"""Subagent transcripts beside a Claude Code session file, and their links.

Claude Code writes each subagent to `<session>/subagents/agent-<id>.jsonl` (older versions:
`agent-<id>.jsonl` beside the session file), with an optional `.meta.json`. Each becomes its
own session under the one whose Task/Agent tool call started it (see
sessions_app/importers/claude_code.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .blocks import short_title
from .source import Source, load_json, open_source, parse_json_line
from .types import ImportedSession

__all__ = ["agent_meta", "attach_agent_files", "find_subagent_files", "transcript_session_id"]

_AGENT_FILE = re.compile(r"^agent-(.+)\.jsonl$")


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
            if candidate != path and transcript_session_id(candidate) == session_id and session_id:
                found[candidate] = None
    return list(found)


def transcript_session_id(path: Path) -> str:
    """The `sessionId` the first lines of a Claude Code transcript name, or ""."""
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


def agent_meta(path: Path) -> dict[str, Any]:
    """A subagent transcript's `<name>.meta.json` beside it, or {}."""
    meta_path = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
    try:
        value = load_json(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def attach_agent_files(
    main: ImportedSession, path: Path, read: Callable[[Source], ImportedSession]
) -> None:
    """Import the session's subagent files (each with `read`) and link each to the tool call
    that started it."""
    agents: dict[str, ImportedSession] = {}
    for agent_path in find_subagent_files(path, str(main.metadata.get("session_id", ""))):
        with open_source(agent_path) as source:
            agent = read(source)
        agent.source_path = str(agent_path)
        match = _AGENT_FILE.match(agent_path.name)
        agent_id = match.group(1) if match else agent.external_id
        meta = agent_meta(agent_path)
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
