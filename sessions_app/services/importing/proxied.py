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
transcripts"). A session the watcher made of the transcript before the proxy stored its
first turn hands the transcript over to the proxied one once that exists (`hand_over`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from compaction import blocks_of
from sessions_app.importers import ImportedMessage, ImportedSession
from sessions_app.models import Compaction, Message, Session
from sessions_app.services.sessions.lifecycle import delete_session

__all__ = ["hand_over", "is_proxied", "not_held_by_proxy", "proxied_twin", "reading_session"]

BlockKey = tuple[str, str]
#: How much of a rollout's first line is read for its session id.
_HEAD_BYTES = 1 << 20


def is_proxied(session: Session) -> bool:
    """True for a session the proxy records (a conversation key of its own)."""
    return bool(session.proxy_key)


def proxied_twin(session: Session) -> Session | None:
    """The proxied session of the conversation the watched `session` was read from (the
    same owner, format and source id), when the proxy stored one: the watcher can see a
    rollout before the proxy stores the request that started it (the proxy stores a turn
    with its answer), and then makes a session of its own first."""
    if is_proxied(session) or not session.external_id:
        return None
    twins = Session.objects.filter(
        owner_id=session.owner_id,
        source_format=session.source_format,
        external_id=session.external_id,
        parent__isnull=True,
    ).exclude(proxy_key="")
    return twins.order_by("created_at", "pk").first()


def reading_session(owner: AbstractBaseUser, source_path: str) -> Session | None:
    """The session of `owner` the watched file at `source_path` is read into: the first one
    read from it, or its proxied twin once the proxy stored one (which then reads the file
    again from its start: `hand_over`); for a file not read yet, the proxied session of the
    Codex session its first line names, if any."""
    sessions = Session.objects.filter(owner_id=owner.pk, source_path=source_path)
    session = sessions.order_by("created_at").first()
    if session is None:
        return _proxied_by_id(owner, _rollout_id(source_path))
    twin = proxied_twin(session)
    if twin is None or not hand_over(session, twin):
        return session
    twin.refresh_from_db()
    return twin


def _rollout_id(source_path: str) -> str:
    """The session id of the Codex rollout at `source_path` (its `session_meta` line), or ""."""
    try:
        with open(source_path, "rb") as file:
            first = json.loads(file.readline(_HEAD_BYTES) or b"null")
    except (OSError, ValueError):
        return ""
    if not isinstance(first, dict) or first.get("type") != "session_meta":
        return ""
    payload = first.get("payload")
    found = payload.get("id") if isinstance(payload, dict) else None
    return found if isinstance(found, str) else ""


def _proxied_by_id(owner: AbstractBaseUser, codex_id: str) -> Session | None:
    if not codex_id:
        return None
    sessions = Session.objects.filter(
        owner_id=owner.pk, source_format="codex", external_id=codex_id[:200], parent__isnull=True
    )
    return sessions.exclude(proxy_key="").order_by("created_at", "pk").first()


def hand_over(watched: Session, twin: Session) -> bool:
    """Give the transcript `watched` was read from to its proxied `twin`, which reads it
    again from its start (`not_held_by_proxy`), and delete `watched`: it holds nothing but
    what the transcript holds. False (nothing done) when `watched` holds more than that: a
    subagent, or a compaction of ctxweb's own."""
    own = Compaction.objects.filter(session=watched).exclude(trigger=Compaction.Trigger.IMPORTED)
    if own.exists() or Session.objects.filter(parent=watched).exists():
        return False
    delete_session(watched)
    Session.objects.filter(pk=twin.pk).update(
        source_path=watched.source_path, source_offset=0, source_fingerprint=""
    )
    return True


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
