"""Which lines of a Claude Code file make the conversation: threads, forks and rewinds.

Claude Code lines form a tree through `uuid`/`parentUuid`. This module reads the small index
of a file (no message content) and decides, line by line, what is imported:

- threads: the main conversation, and each inline subagent (`isSidechain: true` lines, grouped
  by `agentId`, else by the root they hang from); a file with no main-thread message is itself
  a subagent transcript and all of it is the main thread;
- parents: `parentUuid` names the latest earlier line with that uuid (robust to duplicated
  uuids); a parent in another thread or missing makes the line a root;
- compaction summaries: a `compact_boundary` claims the `isCompactSummary` line that names it
  as parent, else the next unclaimed one in the file;
- preserved segments: a boundary whose `compactMetadata.preservedSegment` names a head and a
  tail line kept those lines (head to tail) in the context after the summary;
- forks: a line with two or more real user prompts as children (a rewind), or assistant
  children from different API responses (a regenerated reply), is a fork. The branch that
  leads to the thread's newest message wins (following `logicalParentUuid` across compaction
  boundaries); otherwise the newest branch. The other branches are abandoned. Parallel tool
  calls (assistant lines of one response, results parented to different lines) and
  bookkeeping children (attachments, progress, hooks) are not forks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["ASSISTANT", "BOUNDARY", "OTHER", "PROMPT", "RESULT", "SUMMARY", "Graph", "Node"]

ASSISTANT: Final = "assistant"
PROMPT: Final = "prompt"  # a user line that is not only tool results
RESULT: Final = "result"  # a user line with tool results
SUMMARY: Final = "summary"  # an isCompactSummary user line
BOUNDARY: Final = "boundary"  # a system/compact_boundary line
OTHER: Final = "other"  # any other line with a uuid (attachments, system, progress, ...)

CONVERSATION: Final = frozenset({ASSISTANT, PROMPT, RESULT})


@dataclass(slots=True)
class Node:
    """The index entry of one line with a uuid."""

    line: int
    kind: str
    parent: int = -1
    logical_parent: int = -1
    mid: str | None = None
    meta: bool = False
    sidechain: bool = False
    agent_id: str | None = None
    thread: int = 0
    claims: int = -1  # a boundary: the summary node it claimed
    segment: tuple[int, int] | None = None  # a boundary: (head, tail) of its preserved lines


def classify(record: Mapping[str, Any]) -> tuple[str, str | None]:
    """(kind, API message id) of a Claude Code line with a uuid."""
    kind = record.get("type")
    message = record.get("message")
    if kind == "assistant" and isinstance(message, Mapping):
        mid = message.get("id")
        return ASSISTANT, mid if isinstance(mid, str) else None
    if kind == "user" and isinstance(message, Mapping):
        if record.get("isCompactSummary"):
            return SUMMARY, None
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
        ):
            return RESULT, None
        return PROMPT, None
    if kind == "system" and record.get("subtype") == "compact_boundary":
        return BOUNDARY, None
    return OTHER, None


@dataclass
class Graph:
    """The index of one file, built line by line, then resolved into threads and live lines."""

    nodes: list[Node] = field(default_factory=list)
    _latest: dict[str, int] = field(default_factory=dict)
    #: Nodes on abandoned branches.
    dead: set[int] = field(default_factory=set)
    #: How many threads: 0 is the main conversation, the others inline subagents.
    threads: int = 1

    def add(self, line: int, record: Mapping[str, Any]) -> Node:
        """Index one line (call in file order)."""
        kind, mid = classify(record)
        node = Node(
            line=line,
            kind=kind,
            parent=self._lookup(record.get("parentUuid")),
            logical_parent=self._lookup(record.get("logicalParentUuid")),
            mid=mid,
            meta=bool(record.get("isMeta")),
            sidechain=record.get("isSidechain") is True,
            agent_id=_text(record.get("agentId")),
        )
        if kind == BOUNDARY:
            node.segment = self._segment(record)
        self.nodes.append(node)
        uuid = record.get("uuid")
        if isinstance(uuid, str) and uuid:
            self._latest[uuid] = len(self.nodes) - 1
        return node

    def knows(self, uuid: str) -> bool:
        """True when a line of this read has the uuid."""
        return uuid in self._latest

    def _lookup(self, uuid: Any) -> int:
        return self._latest.get(uuid, -1) if isinstance(uuid, str) else -1

    def _segment(self, record: Mapping[str, Any]) -> tuple[int, int] | None:
        metadata = record.get("compactMetadata")
        segment = metadata.get("preservedSegment") if isinstance(metadata, Mapping) else None
        if not isinstance(segment, Mapping):
            return None
        head, tail = self._lookup(segment.get("headUuid")), self._lookup(segment.get("tailUuid"))
        return (head, tail) if 0 <= head <= tail else None

    def preserved(self, boundary: int) -> set[int]:
        """The lines a boundary kept in the context (tail back to head), or none."""
        segment = self.nodes[boundary].segment
        if segment is None:
            return set()
        head, tail = segment
        kept: set[int] = set()
        current = tail
        while current >= head and current not in kept:
            kept.add(current)
            if current == head:
                return kept
            current = self.nodes[current].parent
        return set()  # the chain does not lead back to the head: keep nothing

    def resolve(self) -> None:
        """Assign threads, claim compaction summaries and abandon the losing branches."""
        self._latest.clear()  # only needed while reading
        self._assign_threads()
        self._claim_summaries()
        children = self._children()
        for thread in range(self.threads):
            self._resolve_forks(thread, children)

    def live(self, index: int) -> bool:
        """True when the node is imported (not on an abandoned branch)."""
        return index not in self.dead

    # -- threads -------------------------------------------------------------------------

    def _assign_threads(self) -> None:
        nodes = self.nodes
        has_main = any(n.kind in CONVERSATION and not n.sidechain for n in nodes)
        if not has_main:
            return  # a subagent transcript: everything is its main thread
        groups: dict[tuple[str, Any], int] = {}
        roots: dict[int, int] = {}
        for index, node in enumerate(nodes):
            if not node.sidechain:
                continue
            key: tuple[str, Any] = (
                ("agent", node.agent_id)
                if node.agent_id
                else ("root", self._side_root(index, roots))
            )
            if key not in groups:
                groups[key] = self.threads
                self.threads += 1
            node.thread = groups[key]

    def _side_root(self, index: int, memo: dict[int, int]) -> int:
        """The first sidechain ancestor of a sidechain node (memoized, cycle-safe)."""
        path: list[int] = []
        current = index
        while current not in memo:
            path.append(current)
            parent = self.nodes[current].parent
            if parent < 0 or parent >= current or not self.nodes[parent].sidechain:
                memo[current] = current
                break
            current = parent
        root = memo[current]
        for visited in path:
            memo[visited] = root
        return root

    def _claim_summaries(self) -> None:
        nodes = self.nodes
        claimed: set[int] = set()
        summaries = [i for i, n in enumerate(nodes) if n.kind == SUMMARY]
        by_parent = {nodes[i].parent: i for i in reversed(summaries) if nodes[i].parent >= 0}
        for index, node in enumerate(nodes):
            if node.kind != BOUNDARY:
                continue
            choice = by_parent.get(index, -1)
            if choice in claimed:
                choice = -1
            if choice < 0:
                choice = next((s for s in summaries if s > index and s not in claimed), -1)
            if choice >= 0:
                claimed.add(choice)
                node.claims = choice
                nodes[choice].thread = node.thread

    # -- forks ---------------------------------------------------------------------------

    def _children(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for index, node in enumerate(self.nodes):
            parent = node.parent
            if 0 <= parent < index and self.nodes[parent].thread == node.thread:
                children.setdefault(parent, []).append(index)
        return children

    def _leaf_path(self, thread: int) -> set[int]:
        """Lines from the thread's newest message back to its start, across boundaries."""
        nodes = self.nodes
        leaf = next(
            (
                i
                for i in range(len(nodes) - 1, -1, -1)
                if nodes[i].thread == thread and nodes[i].kind in CONVERSATION
            ),
            -1,
        )
        path: set[int] = set()
        current = leaf
        while current >= 0 and current not in path:
            path.add(current)
            node = nodes[current]
            step = node.parent if node.parent >= 0 else node.logical_parent
            if step >= current or (step >= 0 and nodes[step].thread != thread):
                step = node.logical_parent if 0 <= node.logical_parent < current else -1
            current = step
        return path

    def _resolve_forks(self, thread: int, children: dict[int, list[int]]) -> None:
        nodes = self.nodes
        on_path = self._leaf_path(thread)
        for parent, kids in children.items():
            if len(kids) < 2 or nodes[parent].thread != thread or parent in self.dead:
                continue
            prompts = [k for k in kids if nodes[k].kind == PROMPT and not nodes[k].meta]
            if len(prompts) >= 2:
                winner = _winner(prompts, on_path)
                for kid in prompts:
                    if kid != winner:
                        self._abandon(kid, children)
            replies = [k for k in kids if nodes[k].kind == ASSISTANT and k not in self.dead]
            if len({nodes[k].mid if nodes[k].mid else f"#{k}" for k in replies}) >= 2:
                winner = _winner(replies, on_path)
                mid = nodes[winner].mid
                for kid in replies:
                    if kid != winner and (mid is None or nodes[kid].mid != mid):
                        self._abandon(kid, children)

    def _abandon(self, start: int, children: dict[int, list[int]]) -> None:
        stack = [start]
        while stack:
            index = stack.pop()
            if index in self.dead or self.nodes[index].kind in {BOUNDARY, SUMMARY}:
                continue
            self.dead.add(index)
            stack.extend(children.get(index, ()))


def _winner(candidates: list[int], on_path: set[int]) -> int:
    for candidate in candidates:
        if candidate in on_path:
            return candidate
    return candidates[-1]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
