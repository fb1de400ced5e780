"""Merge the duplicate sessions earlier versions stored for one conversation (issue 23).

Two kinds, both of one owner:
- a proxied conversation and its "(continued)" twin (same proxy key, no parent) whose
  messages begin with all of the first one's: the proxy took a re-serialized history for an
  edit and stored it all again;
- an imported or watched subagent stored twice under one parent (no proxy key, the same
  call or none, the same first message, one history a prefix of the other): the watcher
  re-created it on a later scan.

Messages are compared in their canonical form (sessions_app/canonical.py: string content as
one text block, `cache_control` and null or empty fields ignored, key order ignored). The
earliest session (by `created_at`) keeps its id; it gets the messages only the later one
has, the later one's subagents and jobs, and the later one is deleted. Nothing is lost: a
pair is skipped (and counted) when both have compactions, when the one to delete has
compactions and the fewer messages, when it has an active job, or when the histories
diverge.

The code takes the model classes as arguments, so a migration passes its historical
models (`apps.get_model`) and no module here imports `sessions_app.models`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from django.db import transaction
from django.db.models import Count, Max, Sum

from sessions_app.canonical import canonical_json

__all__ = ["DedupeModels", "DedupeReport", "merge_duplicate_sessions"]

_CONTINUED: Final = " (continued)"
_ACTIVE_JOB: Final = ("queued", "running")


@dataclass(frozen=True)
class DedupeModels:
    """The model classes the merge works on (current or historical)."""

    session: Any
    message: Any
    entry: Any
    compaction: Any
    job: Any

    @classmethod
    def of(cls, apps: Any) -> DedupeModels:
        """The models of an app registry (a migration's `apps`, or `django.apps.apps`)."""
        return cls(
            *(
                apps.get_model("sessions_app", name)
                for name in ("Session", "Message", "ContextEntry", "Compaction", "CompactionJob")
            )
        )


@dataclass(frozen=True)
class DedupeReport:
    """How many duplicate sessions were merged away, and how many candidates were skipped."""

    merged: int = 0
    skipped: int = 0

    def __add__(self, other: DedupeReport) -> DedupeReport:
        return DedupeReport(self.merged + other.merged, self.skipped + other.skipped)

    def message(self) -> str:
        """The line the migration prints."""
        return f"merged {self.merged} duplicate sessions (skipped {self.skipped})"


def _form(row: Any) -> str:
    """A stored message as compared (sessions_app/canonical.py)."""
    return canonical_json({"role": row.role, "content": row.content})


def merge_duplicate_sessions(models: DedupeModels) -> DedupeReport:
    """Merge every duplicate pair (module docstring); proxied twins first, then the
    subagents (a merge may bring two copies of a subagent under one parent)."""
    report = DedupeReport()
    for group in _proxy_groups(models):
        report += _merge_chain(models, group)
    while True:  # again after merges: a merged subagent's own subagents change parent
        found = DedupeReport()
        for group in _subagent_groups(models):
            found += _merge_group(models, group)
        report += DedupeReport(merged=found.merged)
        if not found.merged:
            return report + DedupeReport(skipped=found.skipped)


def _proxy_groups(models: DedupeModels) -> Iterable[list[Any]]:
    """Proxied top-level sessions of one owner and key, titled as one conversation and its
    continuations, oldest first (only groups holding a continuation)."""
    rows = (
        models.session.objects.filter(parent__isnull=True)
        .exclude(proxy_key="")
        .order_by("owner_id", "proxy_key", "created_at", "pk")
    )
    groups: dict[tuple[Any, str, str], list[Any]] = {}
    for row in rows:
        groups.setdefault((row.owner_id, row.proxy_key, _base_title(row.title)), []).append(row)
    return [rows for rows in groups.values() if any(r.title.endswith(_CONTINUED) for r in rows)]


def _base_title(title: str) -> str:
    while title.endswith(_CONTINUED):
        title = title.removesuffix(_CONTINUED)
    return title


def _subagent_groups(models: DedupeModels) -> Iterable[list[Any]]:
    """Imported or watched subagents of one owner and parent, oldest first."""
    rows = models.session.objects.filter(parent__isnull=False, proxy_key="").order_by(
        "owner_id", "parent_id", "created_at", "pk"
    )
    groups: dict[tuple[Any, Any], list[Any]] = {}
    for row in rows:
        groups.setdefault((row.owner_id, row.parent_id), []).append(row)
    return [rows for rows in groups.values() if len(rows) > 1]


def _merge_chain(models: DedupeModels, group: list[Any]) -> DedupeReport:
    """A conversation and its continuations: each later one that begins with the kept
    one's whole history is merged into it; one that does not is a real continuation
    (the client compacted or edited its history) and is kept from then on."""
    report, keep = DedupeReport(), group[0]
    for later in group[1:]:
        outcome = _merge_pair(models, keep, later, proxied=True)
        report += outcome
        if not outcome.merged:
            keep = later
    return report


def _merge_group(models: DedupeModels, group: list[Any]) -> DedupeReport:
    """Subagents of one parent: each later one that is the same conversation as an
    earlier one still standing is merged into it."""
    report, standing = DedupeReport(), list(group)
    for later in group[1:]:
        for keep in standing[: standing.index(later)]:
            if not _same_call(keep, later) or _first(models, keep) != _first(models, later):
                continue
            outcome = _merge_pair(models, keep, later, proxied=False)
            report += outcome
            if outcome.merged:
                standing.remove(later)
            break
    return report


def _same_call(one: Any, other: Any) -> bool:
    calls = {one.parent_tool_use_id, other.parent_tool_use_id} - {""}
    return len(calls) <= 1


def _first(models: DedupeModels, session: Any) -> str | None:
    row = models.message.objects.filter(session_id=session.pk).order_by("seq").first()
    return None if row is None else _form(row)


def _history(models: DedupeModels, session: Any) -> list[Any]:
    return list(models.message.objects.filter(session_id=session.pk).order_by("seq"))


def _merge_pair(models: DedupeModels, keep: Any, later: Any, *, proxied: bool) -> DedupeReport:
    """Merge `later` into `keep` when one's history is a prefix of the other's (a proxied
    twin must be the longer one); skipped when that would lose anything."""
    keep = models.session.objects.get(pk=keep.pk)  # fresh: an earlier merge may have moved it
    kept, theirs = _history(models, keep), _history(models, later)
    short, long = (kept, theirs) if len(kept) <= len(theirs) else (theirs, kept)
    if proxied and long is kept and len(kept) != len(theirs):
        return DedupeReport(skipped=1)
    same = all(_form(a) == _form(b) for a, b in zip(short, long, strict=False))
    compacted = {
        s.pk for s in (keep, later) if models.compaction.objects.filter(session_id=s.pk).exists()
    }
    active = models.job.objects.filter(session_id=later.pk, status__in=_ACTIVE_JOB).exists()
    lossy = later.pk in compacted and (keep.pk in compacted or len(theirs) < len(kept))
    if not same or lossy or active:
        return DedupeReport(skipped=1)
    with transaction.atomic():
        if later.pk in compacted:
            moved = _take_all(models, keep, later)
        else:
            moved = _take_tail(models, keep, later, len(kept))
        _adopt(models, keep, later, moved)
    return DedupeReport(merged=1)


def _take_tail(models: DedupeModels, keep: Any, later: Any, known: int) -> dict[str, Any]:
    """Move the messages of `later` past the first `known` (and their context entries)
    to the end of `keep`; the fields of `keep` that change."""
    tail = list(models.message.objects.filter(session_id=later.pk).order_by("seq")[known:])
    top = models.entry.objects.filter(session_id=keep.pk).aggregate(top=Max("position"))["top"]
    seq = max(keep.next_seq, _next_seq(models, keep))
    position = max(keep.next_position, -1 if top is None else top + 1)
    for offset, row in enumerate(tail):
        entries = models.entry.objects.filter(session_id=later.pk, message_id=row.pk)
        entries.update(session_id=keep.pk, position=position + offset)
        models.message.objects.filter(pk=row.pk).update(session_id=keep.pk, seq=seq + offset)
    return {"next_seq": seq + len(tail), "next_position": position + len(tail)}


def _next_seq(models: DedupeModels, session: Any) -> int:
    top = models.message.objects.filter(session_id=session.pk).aggregate(top=Max("seq"))["top"]
    return 0 if top is None else top + 1


def _take_all(models: DedupeModels, keep: Any, later: Any) -> dict[str, Any]:
    """`later` holds every message of `keep` and its compactions: its rows replace
    `keep`'s under `keep`'s id; the fields of `keep` that change."""
    models.entry.objects.filter(session_id=keep.pk).delete()
    models.message.objects.filter(session_id=keep.pk).delete()
    for model in (models.message, models.entry, models.compaction):
        model.objects.filter(session_id=later.pk).update(session_id=keep.pk)
    return {
        "next_seq": later.next_seq,
        "next_position": later.next_position,
        "context_revision": max(keep.context_revision, later.context_revision),
    }


def _adopt(models: DedupeModels, keep: Any, later: Any, moved: dict[str, Any]) -> None:
    """`keep` takes the subagents, jobs and proxy bookkeeping of `later` (which the
    client's next request continues), its totals are recomputed, and `later` goes."""
    models.session.objects.filter(parent_id=later.pk).update(parent_id=keep.pk)
    models.job.objects.filter(session_id=later.pk).update(session_id=keep.pk)
    if later.proxy_state:
        moved.update(proxy_state=later.proxy_state, proxy_overhead=later.proxy_overhead)
    models.session.objects.filter(pk=later.pk).delete()
    revision = moved.pop("context_revision", keep.context_revision)
    moved.update(_totals(models, keep))
    models.session.objects.filter(pk=keep.pk).update(
        **moved,
        version=keep.version + 1,
        context_revision=revision + 1,  # cached context responses must not be served again
        last_usage=None,
        updated_at=max(keep.updated_at, later.updated_at),
    )


def _totals(models: DedupeModels, session: Any) -> dict[str, int]:
    history = models.message.objects.filter(session_id=session.pk).aggregate(
        count=Count("id"), tokens=Sum("token_count")
    )
    context = models.entry.objects.filter(session_id=session.pk).aggregate(
        count=Count("id"), tokens=Sum("token_count")
    )
    compactions = models.compaction.objects.filter(session_id=session.pk, status="succeeded")
    return {
        "message_count": int(history["count"] or 0),
        "history_tokens": int(history["tokens"] or 0),
        "context_entry_count": int(context["count"] or 0),
        "context_tokens": int(context["tokens"] or 0),
        "compaction_count": compactions.exclude(strategy="offload").count(),
    }
