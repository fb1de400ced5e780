"""Writing an engine result back into a session: one transaction, an optimistic check.

A compaction (or a truncation) works on a `ContextSnapshot` taken without a lock; its
output is committed by `commit_context` only if no entry it worked on has changed since
(the session's `context_revision`, which appends leave alone). Entries appended meanwhile
have higher positions and stay after the summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from compaction import SUMMARY_KEY, is_summary_message, message_token_counts, tool_use_ids
from sessions_app.models import Compaction, ContextEntry, Session
from sessions_app.services.compacting.archives import ArchivedEntry, ArchiveHeader, write_archive
from sessions_app.services.compacting.recall_line import add_recall_line
from sessions_app.services.errors import Conflict, InvariantError
from sessions_app.services.sessions.entries import (
    ENTRY_KEY,
    load_entries,
    split_message,
    tagged_message,
)
from sessions_app.services.sessions.state import Change, advance
from sessions_app.storage import delete_stored_quietly

__all__ = [
    "IN_FORCE_FIELDS",
    "CommitMeta",
    "ContextSnapshot",
    "commit_context",
    "next_number",
    "policy_in_force",
    "save_entry_counters",
    "take_snapshot",
]

#: The Compaction fields that keep the limits in force when it ran (`policy_in_force`).
IN_FORCE_FIELDS = ("context_limit", "threshold_tokens", "hard_limit")


@dataclass
class ContextSnapshot:
    """The runtime context as a compaction found it, without any lock held.

    `entries`/`messages` go to the engine; `pending` is a trailing assistant message whose
    tool calls have no results yet: it is kept out of the engine and stays last.
    """

    session: Session
    revision: int
    version: int
    entries: list[ContextEntry]
    messages: list[dict[str, Any]]
    pending: list[ContextEntry] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Cached tokens of the whole snapshot, pending entries included."""
        return sum(e.token_count for e in self.entries) + self.pending_tokens

    @property
    def pending_tokens(self) -> int:
        return sum(e.token_count for e in self.pending)

    @property
    def token_counts(self) -> list[int]:
        """Cached tokens of each engine message."""
        return [e.token_count for e in self.entries]


def take_snapshot(session: Session) -> ContextSnapshot:
    """The session's entries now, with the revision read first.

    No lock and no transaction: a change committed after the revision was read makes the
    commit's revision check fail (a safe Conflict), and appends only add later entries.
    """
    fresh = Session.objects.get(pk=session.pk)
    entries = load_entries(fresh)
    pending: list[ContextEntry] = []
    if entries and entries[-1].role == "assistant":
        message = tagged_message(entries[-1])
        if tool_use_ids(message):
            pending = [entries.pop()]
    return ContextSnapshot(
        session=fresh,
        revision=fresh.context_revision,
        version=fresh.version,
        entries=entries,
        messages=[tagged_message(e) for e in entries],
        pending=pending,
    )


@dataclass
class CommitMeta:
    """What the Compaction row records besides the context change."""

    trigger: str
    strategy: str = ""
    summarizer: str = ""
    model: str = ""
    instructions: str = ""
    summary: str = ""
    encoding: str | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    duration_ms: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    #: When it was prepared ahead of time (services/compacting/prepared.py), if it was.
    prepared_at: Any = None


def commit_context(
    snapshot: ContextSnapshot, output: Sequence[Mapping[str, Any]], meta: CommitMeta
) -> Compaction:
    """Replace the snapshot's entries by `output` (the engine's new messages) atomically.

    Raises Conflict when the entries changed since the snapshot (another compaction won),
    ArchiveUnavailable when the archive cannot be written; either way nothing is changed.
    An output the engine should never produce (entries reordered) is an InvariantError.
    """
    plan = _plan(snapshot, output, meta.encoding)
    stored_name: str | None = None
    try:
        with transaction.atomic():
            session = _lock_unchanged(snapshot)
            number = next_number(session)
            now = timezone.now()
            compaction = _new_compaction(session, number, now, meta, plan, snapshot, output)
            stored_name = _write_archive(session, compaction, plan, now)
            compaction.archive.name = stored_name
            compaction.save()
            _apply(session, compaction, plan)
            add_recall_line(session, compaction, meta.encoding)  # issue 28
            save_entry_counters(session)
    except BaseException:
        if stored_name:
            delete_stored_quietly(stored_name)
        raise
    snapshot.session.refresh_from_db()
    return compaction


def policy_in_force(details: Mapping[str, Any]) -> dict[str, int | None]:
    """The Compaction fields of the limits in force, from the policy a run recorded in its
    details (`details["policy"]`, Policy.to_dict()); all None when it recorded none."""
    policy = details.get("policy")
    unknown: dict[str, int | None] = dict.fromkeys(IN_FORCE_FIELDS)
    if not isinstance(policy, Mapping):
        return unknown
    try:
        limit = int(policy["context_limit"])
        threshold = int(limit * float(policy["trigger_ratio"]))
        hard = policy.get("hard_limit")
        return {
            "context_limit": limit,
            "threshold_tokens": threshold,
            "hard_limit": int(hard) if hard is not None else limit,
        }
    except (KeyError, TypeError, ValueError):
        return unknown


def next_number(session: Session) -> int:
    """The next compaction number of a (locked) session."""
    top = Compaction.objects.filter(session=session).aggregate(top=Max("number"))["top"]
    return int(top or 0) + 1


def save_entry_counters(session: Session) -> None:
    """Save the counters of a locked session whose existing entries changed (compaction,
    revert, offload): services/sessions/state.py's rules, the last write of each."""
    changes = advance(session, Change(entries_changed=True))
    session.save(update_fields=list(changes))


@dataclass
class _Plan:
    """How the entries change: removed, transformed (new content), added (new messages)."""

    removed: list[ContextEntry]
    transformed: list[tuple[ContextEntry, dict[str, Any], int]]
    added: list[tuple[int, dict[str, Any], int]]  # position, message, tokens
    #: The removed entries a new entry stands in for (the marker's range); the other removed
    #: entries were dropped elsewhere (e.g. old tool blocks pruned from the tail).
    span: list[ContextEntry] = field(default_factory=list)

    @property
    def positions(self) -> list[int]:
        touched = [e.position for e in self.removed] + [e.position for e, _, _ in self.transformed]
        return touched


def _plan(
    snapshot: ContextSnapshot, output: Sequence[Mapping[str, Any]], encoding: str | None
) -> _Plan:
    by_id = {
        entry.pk: (entry, message)
        for entry, message in zip(snapshot.entries, snapshot.messages, strict=True)
    }
    order = {entry.pk: index for index, entry in enumerate(snapshot.entries)}
    kept: list[int] = []
    transformed: list[tuple[ContextEntry, dict[str, Any]]] = []
    new_messages: list[tuple[int, dict[str, Any]]] = []  # (index of previous kept, message)
    for message in output:
        entry_id = message.get(ENTRY_KEY)
        if entry_id in by_id:
            if kept and order[entry_id] <= order[kept[-1]]:
                raise InvariantError("the engine reordered or repeated context entries")
            kept.append(entry_id)
            entry, original = by_id[entry_id]
            if message is not original and _differs(message, original):
                transformed.append((entry, dict(message)))
        else:
            new_messages.append((len(kept), dict(message)))
    kept_set = set(kept)
    removed = [e for e in snapshot.entries if e.pk not in kept_set]
    added = _place(snapshot, kept, removed, new_messages)
    changed = [message for _, message in transformed] + [message for _, message in added]
    counts = message_token_counts([_clean(m) for m in changed], encoding) if changed else []
    split = len(transformed)
    return _Plan(
        removed=removed,
        transformed=[(e, m, c) for (e, m), c in zip(transformed, counts[:split], strict=True)],
        added=[(p, m, c) for (p, m), c in zip(added, counts[split:], strict=True)],
        span=_span(snapshot, kept_set, removed, [p for p, _ in added]),
    )


def _span(
    snapshot: ContextSnapshot, kept: set[int], removed: list[ContextEntry], slots: list[int]
) -> list[ContextEntry]:
    """The removed entries in the runs (between kept entries) where new entries were placed."""
    if not slots:
        return list(removed)
    runs: list[list[ContextEntry]] = [[]]
    for entry in snapshot.entries:
        if entry.pk in kept:
            runs.append([])
        else:
            runs[-1].append(entry)
    wanted = set(slots)
    return [e for run in runs if any(e.position in wanted for e in run) for e in run]


def _place(
    snapshot: ContextSnapshot,
    kept: list[int],
    removed: list[ContextEntry],
    new_messages: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """Positions for new messages: freed positions between their kept neighbours."""
    position_of = {e.pk: e.position for e in snapshot.entries}
    free = sorted(e.position for e in removed)
    placed: list[tuple[int, dict[str, Any]]] = []
    for kept_before, message in new_messages:
        low = position_of[kept[kept_before - 1]] if kept_before else -1
        high = position_of[kept[kept_before]] if kept_before < len(kept) else None
        slot = next((p for p in free if p > low and (high is None or p < high)), None)
        if slot is None:
            raise InvariantError("no free position for a new context entry")
        free.remove(slot)
        placed.append((slot, message))
    return placed


def _differs(message: Mapping[str, Any], original: Mapping[str, Any]) -> bool:
    return _clean(message) != _clean(original)


def _clean(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != ENTRY_KEY}


def _lock_unchanged(snapshot: ContextSnapshot) -> Session:
    try:
        session = Session.objects.select_for_update().get(pk=snapshot.session.pk)
    except Session.DoesNotExist:
        raise Conflict("the session was deleted while it was being compacted") from None
    if session.context_revision != snapshot.revision:
        raise Conflict(
            "the session's context changed while it was being compacted "
            "(another compaction, revert or offload committed first); try again"
        )
    return session


def _new_compaction(
    session: Session,
    number: int,
    now: Any,
    meta: CommitMeta,
    plan: _Plan,
    snapshot: ContextSnapshot,
    output: Sequence[Mapping[str, Any]],
) -> Compaction:
    seqs = _covered_seqs(plan.span)
    positions = plan.positions
    stats = dict(meta.stats)
    tokens_before = int(stats.get("original_token_count") or snapshot.tokens)
    tokens_after = int(stats.get("compacted_token_count") or 0)
    if snapshot.pending:
        tokens_before += snapshot.pending_tokens
        tokens_after += snapshot.pending_tokens
    details = dict(meta.details)
    details["removed_entries"] = len(plan.removed)
    spanned = {e.pk for e in plan.span}
    details["dropped_seqs"] = _covered_seqs([e for e in plan.removed if e.pk not in spanned])
    details["transformed_entries"] = len(plan.transformed)
    return Compaction(
        session=session,
        number=number,
        created_at=now,
        trigger=meta.trigger,
        strategy=meta.strategy[:64],
        summarizer=meta.summarizer[:128],
        model=meta.model[:128],
        instructions=meta.instructions,
        first_seq=min(seqs) if seqs else None,
        last_seq=max(seqs) if seqs else None,
        first_position=min(positions) if positions else None,
        last_position=max(positions) if positions else None,
        summary=meta.summary,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        messages_before=len(snapshot.entries) + len(snapshot.pending),
        messages_after=len(output) + len(snapshot.pending),
        compacted_message_count=int(stats.get("compacted_message_count") or len(plan.removed)),
        retained_message_count=int(stats.get("retained_message_count") or 0),
        ratio=stats.get("compaction_ratio"),
        recall=stats.get("recall"),
        duration_ms=meta.duration_ms,
        status=Compaction.Status.SUCCEEDED,
        details=details,
        prepared_at=meta.prepared_at,
        **policy_in_force(details),
    )


def _covered_seqs(removed: Sequence[ContextEntry]) -> list[int]:
    """Original message seqs covered by the removed entries (a summary covers its range)."""
    seqs: list[int] = []
    summary_ids = [e.compaction_id for e in removed if e.compaction_id is not None]
    ranges = {
        pk: (first, last)
        for pk, first, last in Compaction.objects.filter(pk__in=summary_ids).values_list(
            "pk", "first_seq", "last_seq"
        )
    }
    for entry in removed:
        if entry.message is not None:
            seqs.append(entry.message.seq)
        elif entry.compaction_id in ranges:
            seqs.extend(s for s in ranges[entry.compaction_id] if s is not None)
    return seqs


def _write_archive(session: Session, compaction: Compaction, plan: _Plan, now: Any) -> str:
    """The exact replaced (and transformed) entries as the compaction's archive."""
    header = ArchiveHeader(str(session.pk), compaction.number, now, compaction.trigger)
    replaced = (ArchivedEntry.of(e) for e in plan.removed)
    return write_archive(header, replaced, (ArchivedEntry.of(e) for e, _, _ in plan.transformed))


def _apply(session: Session, compaction: Compaction, plan: _Plan) -> None:
    """Delete removed entries, update transformed ones, insert the new ones; link parents."""
    absorbed = [e.compaction_id for e in plan.removed if e.compaction_id is not None]
    if absorbed:
        Compaction.objects.filter(pk__in=absorbed).update(parent=compaction)
    ContextEntry.objects.filter(pk__in=[e.pk for e in plan.removed]).delete()
    for entry, message, tokens in plan.transformed:
        _role, content, extra = split_message(message)
        base = entry.message.extra if entry.message is not None else {}
        entry.content = content
        entry.extra = {k: v for k, v in extra.items() if base.get(k, _MISSING) != v}
        entry.token_count = tokens
        entry.save(update_fields=["content", "extra", "token_count"])
    ContextEntry.objects.bulk_create(
        [
            _new_entry(session, compaction, position, message, tokens)
            for position, message, tokens in plan.added
        ]
    )


_MISSING = object()


def _new_entry(
    session: Session, compaction: Compaction, position: int, message: dict[str, Any], tokens: int
) -> ContextEntry:
    role, content, extra = split_message(message)
    summary = is_summary_message(message)
    if summary:
        marker = extra.get(SUMMARY_KEY)
        extra[SUMMARY_KEY] = {
            **(marker if isinstance(marker, dict) else {}),
            "compaction": compaction.number,
        }
    return ContextEntry(
        session=session,
        position=position,
        kind=ContextEntry.Kind.SUMMARY if summary else ContextEntry.Kind.MESSAGE,
        compaction=compaction,
        role=role,
        content=content,
        extra=extra,
        token_count=tokens,
    )
