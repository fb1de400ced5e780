"""SessionBuilder: turns a stream of source messages into a valid ImportedSession.

Every importer feeds messages in order (`add`), marks the compactions the agent made
(`mark_compaction`) and accounts for lines it did not import (`skip`, `keep_raw`). The builder
keeps the history a valid Anthropic request as it goes, holding only the previous message:

- system messages after the start become user text marked as such;
- tool_use ids are made unique (replays reuse ids) and missing ids are made up;
- each tool call is answered in the next user message: a call the source never answered gets
  a synthetic, marked, error result; a result answering no call becomes marked text; results
  come first in their message;
- a compaction covers everything before it after the leading system messages, absorbs the
  previous compaction, and restarts the runtime context at its summary.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from compaction import Block, blocks_of, starts_round, tool_result_text

from .blocks import NO_RESULT_TEXT, NO_SUMMARY_TEXT, content_text, text_block
from .messagelog import MessageLog
from .normalize import normalize_message
from .provider_compaction import PROVIDER_TRIGGER, ProviderCompaction, split_at_compactions
from .types import ContextItem, ImportedCompaction, ImportedMessage, ImportedSession, SkippedLine

__all__ = ["SYSTEM_MOVED_TEXT", "SessionBuilder"]

#: Prefix of a system message that appeared after the conversation started.
SYSTEM_MOVED_TEXT: Final = "[ctxweb: system message from the middle of the conversation]"
#: At most this many skipped lines are listed; all are counted.
MAX_LISTED_SKIPS: Final = 1000


class SessionBuilder:
    """Builds one ImportedSession from messages fed in order."""

    def __init__(self, source_format: str, *, source_name: str = "") -> None:
        self._log = MessageLog()
        self.session = ImportedSession(
            source_format=source_format, messages=self._log, source_name=source_name
        )
        self._raw_types: Counter[str] = Counter()
        self._tail: ImportedMessage | None = None
        self._tail_size = 0
        self._count = 0
        self._head_end = 0
        self._seen_other = False
        self._context: list[ContextItem] = []
        self._round_positions: list[int] = []
        self._context_floor = 0
        # Tool calls of the previous message, when it is an assistant message with calls.
        self._pending: list[str] = []
        self._renamed: dict[str, list[str]] = {}
        self._used_ids: set[str] = set()
        self._made_up: set[str] = set()
        self._made_ids = 0

    # -- feeding -----------------------------------------------------------------------

    def add(self, item: ImportedMessage, size_hint: int = 0) -> None:
        """Append one source message (normalized and paired on the way in).

        An assistant message holding provider compaction blocks (provider_compaction.py) is
        cut there: each block becomes a compaction point between the pieces.
        """
        pieces = split_at_compactions(item)
        if pieces is not None:
            self._add_pieces(pieces, item.created_at, size_hint)
            return
        item = normalize_message(item)
        if item.role == "system" and self._seen_other:
            move_system_into_conversation(item)
        if item.role == "assistant":
            self._answer_pending(item.created_at)
            self._claim_tool_ids(item)
        elif item.role == "user":
            self._pair_results(item)
        self._commit(item, size_hint)

    def _add_pieces(
        self,
        pieces: list[ImportedMessage | ProviderCompaction],
        created_at: datetime | None,
        size_hint: int,
    ) -> None:
        for piece in pieces:
            if isinstance(piece, ImportedMessage):
                self.add(piece, size_hint)
                size_hint = 0
            else:
                self.mark_provider_compaction(piece, created_at)

    def mark_provider_compaction(
        self, found: ProviderCompaction, created_at: datetime | None, original_id: str = ""
    ) -> ImportedCompaction:
        """Record a compaction the model provider made here (its summary may be opaque)."""
        block = found.raw.get("block")
        block_id = block.get("id") if isinstance(block, Mapping) else None
        return self.mark_compaction(
            summary=found.summary,
            created_at=created_at,
            trigger=PROVIDER_TRIGGER,
            original_id=original_id or (block_id if isinstance(block_id, str) else ""),
            raw=found.raw,
        )

    def set_usage(self, usage: Mapping[str, Any]) -> bool:
        """Attach token usage to the latest message when it is an assistant message."""
        if self._tail is None or self._tail.role != "assistant":
            return False
        self._tail.usage = dict(usage)
        return True

    def mark_compaction(  # noqa: PLR0913 (keyword-only fields of one compaction record)
        self,
        *,
        summary: str = "",
        created_at: datetime | None = None,
        trigger: str = "",
        pre_tokens: int | None = None,
        post_tokens: int | None = None,
        original_id: str = "",
        context_content: Any = None,
        raw: Mapping[str, Any] | None = None,
        keep_last: int = 0,
    ) -> ImportedCompaction:
        """Record a compaction the agent made here: it replaced everything before this point.

        `keep_last`: how many of the newest messages the agent kept after its summary.
        """
        if keep_last and self._pending:
            keep_last += 1  # the synthetic answer inserted next belongs to the kept part
        self._answer_pending(created_at)
        compactions = self.session.compactions
        end = max(self._count - keep_last, self._head_end)
        first = self._head_end if end > self._head_end else None
        compaction = ImportedCompaction(
            first_index=first,
            last_index=end - 1 if first is not None else None,
            summary=summary,
            created_at=created_at,
            trigger=trigger,
            pre_tokens=pre_tokens,
            post_tokens=post_tokens,
            original_id=original_id,
            context_content=context_content,
            raw=dict(raw or {}),
            at_message=self._count,
        )
        if compactions and compactions[-1].absorbed_by is None:
            compactions[-1].absorbed_by = len(compactions)
        compactions.append(compaction)
        self._context = [ContextItem("message", i) for i in range(self._head_end)]
        self._context.append(ContextItem("summary", len(compactions) - 1))
        self._round_positions = []
        self._context_floor = len(self._context)
        self._context.extend(ContextItem("message", i) for i in range(end, self._count))
        self._seen_other = True  # the summary is a user message: system ones must lead it
        return compaction

    def rollback_turns(self, turns: int) -> int:
        """Drop the newest `turns` user rounds from the runtime context (they stay in history).

        Returns how many context entries were dropped.
        """
        if turns <= 0 or not self._round_positions:
            return 0
        self._answer_pending(None)  # calls of dropped turns: their results never came
        cut = self._round_positions[-min(turns, len(self._round_positions))]
        cut = max(cut, self._context_floor)
        dropped = len(self._context) - cut
        del self._context[cut:]
        self._round_positions = [p for p in self._round_positions if p < cut]
        return dropped

    def skip(self, line: int, reason: str) -> None:
        """Report a line that could not be imported."""
        self.session.skipped_count += 1
        if len(self.session.skipped) < MAX_LISTED_SKIPS:
            self.session.skipped.append(SkippedLine(line, reason))

    def keep_raw(self, kind: str, count: int = 1) -> None:
        """Count a line kept only in the raw source (bookkeeping or an unknown type)."""
        self.session.kept_raw += count
        self._raw_types[kind or "unknown"] += count

    @property
    def message_count(self) -> int:
        """Messages added so far (including synthetic ones)."""
        return self._count

    def finish(self) -> ImportedSession:
        """Close the stream: answer the last pending calls and return the session."""
        self._answer_pending(self._tail.created_at if self._tail else None)
        if self._tail is not None:
            self._log.append(self._tail, self._tail_size)
            self._tail = None
        for compaction in self.session.compactions:
            if not compaction.summary.strip():
                compaction.summary = NO_SUMMARY_TEXT
                if (
                    compaction.context_content is None
                    or not content_text(compaction.context_content).strip()
                ):
                    compaction.context_content = None
        self.session.context = self._context
        if self._raw_types:
            self.session.metadata["kept_raw_types"] = dict(sorted(self._raw_types.items()))
        return self.session

    # -- internals -----------------------------------------------------------------------

    def _commit(self, item: ImportedMessage, size_hint: int) -> None:
        if self._tail is not None:
            self._log.append(self._tail, self._tail_size)
        self._tail, self._tail_size = item, size_hint
        position = len(self._context)
        self._context.append(ContextItem("message", self._count))
        if item.role == "system":
            if not self._seen_other:
                self._head_end = self._count + 1
        else:
            self._seen_other = True
        if starts_round(item.message) and not any(
            b.get("type") == "tool_result" for b in blocks_of(item.message)
        ):
            self._round_positions.append(position)
        self._count += 1

    def _claim_tool_ids(self, item: ImportedMessage) -> None:
        """Give every tool_use a unique id and remember the calls awaiting results."""
        content = item.message["content"]
        if not isinstance(content, list):
            return
        blocks: list[Block] = []
        for block in content:
            if block.get("type") == "tool_use":
                block = dict(block)
                original = block.get("id")
                if original is None:
                    self._made_ids += 1
                    block["id"] = f"ctxweb_call_{self._made_ids}"
                    self._made_up.add(block["id"])
                    item.extra["made_up_tool_ids"] = item.extra.get("made_up_tool_ids", 0) + 1
                elif original in self._used_ids:
                    block["id"] = self._unique(original)
                    self._renamed.setdefault(original, []).append(block["id"])
                    item.extra.setdefault("renamed_tool_ids", {})[block["id"]] = original
                self._used_ids.add(block["id"])
                self._pending.append(block["id"])
            blocks.append(block)
        item.message["content"] = blocks

    def _unique(self, original: str) -> str:
        number = 2
        while f"{original}~{number}" in self._used_ids:
            number += 1
        return f"{original}~{number}"

    def _pair_results(self, item: ImportedMessage) -> None:
        """Answer the previous message's calls in this user message; orphans become text."""
        content = item.message["content"]
        if isinstance(content, str) and not self._pending:
            return
        blocks = blocks_of(item.message)
        unanswered = list(self._pending)
        results: list[Block] = []
        others: list[Block] = []
        for block in blocks:
            if block.get("type") != "tool_result":
                others.append(block)
                continue
            tool_id = self._resolve(block.get("tool_use_id"), unanswered)
            if tool_id is None:
                others.append(_orphan_text(block))
                item.extra.setdefault("orphan_results", []).append(block)
                continue
            unanswered.remove(tool_id)
            if block.get("tool_use_id") not in (None, tool_id):
                item.extra.setdefault("result_ids", {})[tool_id] = block["tool_use_id"]
            results.append(dict(block, tool_use_id=tool_id))
        synthetic = [_synthetic_result(tool_id) for tool_id in unanswered]
        if synthetic:
            item.extra["synthetic_results"] = len(synthetic)
        if results or synthetic or others != blocks:
            item.message["content"] = results + synthetic + others
        self._pending = []
        self._renamed = {}

    def _resolve(self, tool_id: Any, unanswered: list[str]) -> str | None:
        if tool_id is None:
            return unanswered[0] if unanswered else None
        if tool_id in unanswered:
            return str(tool_id)
        for renamed in self._renamed.get(tool_id, []):
            if renamed in unanswered:
                return renamed
        # A call the source recorded without an id is answered by a result naming an id
        # that matches no call (Claude Code keeps such ids in `sourceToolUseID`).
        return next((t for t in unanswered if t in self._made_up), None)

    def _answer_pending(self, created_at: datetime | None) -> None:
        """Insert a synthetic user message answering calls that got no result."""
        if not self._pending:
            return
        synthetic = ImportedMessage(
            message={"role": "user", "content": [_synthetic_result(t) for t in self._pending]},
            created_at=created_at,
            extra={"ctxweb_synthetic": True, "synthetic_results": len(self._pending)},
        )
        self._pending = []
        self._renamed = {}
        self._commit(synthetic, 0)


def _synthetic_result(tool_id: str) -> Block:
    return {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": NO_RESULT_TEXT,
        "is_error": True,
        "ctxweb_synthetic": True,
    }


def _orphan_text(block: Mapping[str, Any]) -> Block:
    # `block` is normalized already: its content is canonical tool-result content.
    tool_id = block.get("tool_use_id") or "(no id)"
    body = tool_result_text(block.get("content"))
    if not body.strip():
        body = json.dumps(block.get("content"), ensure_ascii=False)
    return text_block(
        f"[ctxweb: result of tool call {tool_id}, which has no matching call]\n{body}"
    )


def move_system_into_conversation(item: ImportedMessage) -> None:
    """Make a system message that came after the conversation began a marked user message."""
    item.extra.setdefault("original_role", "system")
    item.message["role"] = "user"
    item.message["is_meta"] = True
    item.message["content"] = [text_block(SYSTEM_MOVED_TEXT), *blocks_of(item.message)]
