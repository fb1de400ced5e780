"""Whole-session invariants: what "not corrupted, nothing lost" means for a stored session.

`session_problems(session, expected_messages=N)` returns a list of human-readable problems
(empty when the session is sound). Used in-process by the fault tests and inside
subprocesses (tests/deploy/remote.py) by the worker and load tests.
"""

from __future__ import annotations

from typing import Any

from django.core.files.storage import default_storage
from django.db.models import Sum

from compaction import validate_messages
from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.context.runtime import runtime_messages

__all__ = ["context_fingerprint", "session_problems"]


def session_problems(session: Session, *, expected_messages: int | None = None) -> list[str]:
    """Every broken invariant of `session` (fresh from the database), as text."""
    session = Session.objects.get(pk=session.pk)
    problems: list[str] = []
    problems += _history_problems(session, expected_messages)
    problems += _context_problems(session)
    problems += _compaction_problems(session)
    return problems


def context_fingerprint(session: Session) -> list[tuple[Any, ...]]:
    """The runtime context as comparable tuples: equal before and after means unchanged."""
    return [
        (e.position, e.kind, e.message_id, e.compaction_id, e.role, e.content, e.token_count)
        for e in ContextEntry.objects.filter(session=session).order_by("position")
    ]


def _history_problems(session: Session, expected: int | None) -> list[str]:
    problems = []
    seqs = list(
        Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True)
    )
    if seqs != list(range(len(seqs))):
        problems.append(f"history seqs are not 0..{len(seqs) - 1}")
    if expected is not None and len(seqs) != expected:
        problems.append(f"history has {len(seqs)} messages, expected {expected}")
    if session.message_count != len(seqs) or session.next_seq != len(seqs):
        problems.append(
            f"cached message_count {session.message_count} / next_seq {session.next_seq} "
            f"!= {len(seqs)} stored"
        )
    tokens = Message.objects.filter(session=session).aggregate(t=Sum("token_count"))["t"] or 0
    if session.history_tokens != tokens:
        problems.append(f"cached history_tokens {session.history_tokens} != {tokens}")
    return problems


def _context_problems(session: Session) -> list[str]:
    problems = []
    entries = list(
        ContextEntry.objects.filter(session=session)
        .select_related("compaction")
        .order_by("position")
    )
    positions = [e.position for e in entries]
    if len(set(positions)) != len(positions):
        problems.append("duplicate context positions")
    if session.context_entry_count != len(entries):
        problems.append(
            f"cached context_entry_count {session.context_entry_count} != {len(entries)}"
        )
    tokens = sum(e.token_count for e in entries)
    if session.context_tokens != tokens:
        problems.append(f"cached context_tokens {session.context_tokens} != {tokens}")
    messages = runtime_messages(session)
    for problem in _request_problems(messages):
        problems.append(f"runtime context invalid: {problem}")
    for entry in entries:
        if entry.kind == ContextEntry.Kind.SUMMARY:
            compaction = entry.compaction
            if compaction is None or compaction.status != Compaction.Status.SUCCEEDED:
                problems.append(f"summary entry {entry.pk} without a succeeded compaction")
        elif entry.message_id is None:
            problems.append(f"message entry {entry.pk} without a history message")
    return problems


def _request_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Problems of the context as a request; a trailing assistant tool call may be pending."""
    if messages and messages[-1].get("role") == "assistant":
        content = messages[-1].get("content")
        ids = [
            block.get("id")
            for block in (content if isinstance(content, list) else [])
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        if ids:
            answer = [{"type": "tool_result", "tool_use_id": i, "content": "pending"} for i in ids]
            messages = [*messages, {"role": "user", "content": answer}]
    return [f"{problem.path}: {problem.message}" for problem in validate_messages(messages)]


def _compaction_problems(session: Session) -> list[str]:
    problems = []
    compactions = list(Compaction.objects.filter(session=session).order_by("number"))
    numbers = [c.number for c in compactions]
    if numbers != sorted(set(numbers)):
        problems.append(f"compaction numbers not unique: {numbers}")
    succeeded = [c for c in compactions if c.status == Compaction.Status.SUCCEEDED]
    points = [c for c in succeeded if c.is_point]  # an offload's record is none
    if session.compaction_count != len(points):
        problems.append(f"cached compaction_count {session.compaction_count} != {len(points)}")
    for compaction in succeeded:
        name = compaction.archive.name
        if name and not default_storage.exists(name):
            problems.append(f"compaction #{compaction.number}: archive {name} missing")
    return problems
