"""A transcript of a session the proxy records too: one session, not two (issue 25).

Codex's session id names both the session the proxy stores (its `external_id`, format
`codex`) and the rollout Codex writes, so the importer and the watcher find the proxied
session as the one "stored before from the same transcript" (files.find_source_session).
Merged as an ordinary re-read, the rollout would not line up with what the proxy stored:
the proxy keeps the developer messages as the session's overhead and stores a turn of the
wire as one message, the rollout has one message per item. Every message would be appended
a second time.

So for a proxied session the proxy's record is the conversation, and a transcript adds only
what came after it: its system messages (the proxy's overhead) and its compaction points
(the proxy records the agent's compactions as they pass) go; of its other blocks, those up
to the last one the session holds are covered by the proxy's record (a text or a reasoning
summary by its words, a tool call or result by its id, a compaction's summary as a text;
each stored block stands for one block of the transcript), even where the proxy never stored
them as such (a tool result Codex sent only inside its compaction request). The blocks after
that one, an answer whose stream the proxy lost say, are appended after the proxy's last
message, so reading the transcript again adds nothing more (docs/behaviour.md, "Watched
transcripts").
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from compaction import blocks_of
from sessions_app.importers import ImportedMessage, ImportedSession
from sessions_app.models import Compaction, Message, Session

__all__ = ["is_proxied", "not_held_by_proxy"]

BlockKey = tuple[str, str]


def is_proxied(session: Session) -> bool:
    """True for a session the proxy records (a conversation key of its own)."""
    return bool(session.proxy_key)


def not_held_by_proxy(session: Session, imported: ImportedSession) -> ImportedSession:
    """`imported` without what the proxied `session` already covers (module doc): no
    system messages, no compaction points, and of its messages only the blocks after the
    last one the stored messages (or the session's compaction summaries) hold."""
    held = _held(session)
    found = [
        (item, block, _take(held, _key(block)))
        for item in imported.messages
        if item.role != "system"
        for block in blocks_of(item.message)
    ]
    last = max((n for n, (_, _, is_held) in enumerate(found) if is_held), default=-1)
    kept: list[ImportedMessage] = []
    source: ImportedMessage | None = None
    for item, block, _ in found[last + 1 :]:
        if item is source:  # another block of the same message
            kept[-1].message["content"].append(block)
        else:
            kept.append(replace(item, message={**item.message, "content": [block]}))
            source = item
    return replace(imported, messages=kept, compactions=[], context=[])


def _held(session: Session) -> Counter[BlockKey]:
    """Each block the session's messages hold, and each compaction summary as a text."""
    contents = Message.objects.filter(session=session).values_list("content", flat=True)
    held = Counter(key for content in contents for key in _keys(_blocks(content)))
    summaries = Compaction.objects.filter(session=session).values_list("summary", flat=True)
    held.update(("text", summary.strip()) for summary in summaries if summary.strip())
    return held


def _blocks(content: Any) -> list[Any]:
    return blocks_of({"role": "user", "content": content}) if content else []


def _keys(blocks: Iterable[Any]) -> Iterable[BlockKey]:
    return (_key(block) for block in blocks)


def _take(held: Counter[BlockKey], key: BlockKey) -> bool:
    """True (and one fewer held) when a stored block is `key`."""
    if held[key] <= 0:
        return False
    held[key] -= 1
    return True


def _key(block: Any) -> BlockKey:
    """What says "the same block" whichever side stored it: a call or a result by its id,
    a text or a reasoning summary by its words, anything else by its JSON."""
    if not isinstance(block, dict):
        return ("other", json.dumps(block, sort_keys=True, default=str))
    kind = str(block.get("type"))
    if kind == "tool_use":
        return (kind, str(block.get("id")))
    if kind == "tool_result":
        return (kind, str(block.get("tool_use_id")))
    if kind in {"text", "thinking"}:
        return (kind, str(block.get(kind) or "").strip())
    return ("other", json.dumps(block, sort_keys=True, default=str))
