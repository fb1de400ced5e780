"""What a proxied request forwards: the runtime context's rewritten head, then the client's
own messages from the first one the context left untouched.

The split is found from the entries' kinds and sequence numbers alone (no content is read)
and kept in process for the session's `context_revision`: appends (the proxy's own) only
add untouched entries after it, so the split stands until a compaction, revert or offload
bumps the revision. The rendered head is kept too (a few sessions' worth), so the rewritten
prefix is the same bytes on every request between compactions and is not re-read.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from django.db.models import BooleanField, ExpressionWrapper, Q

from sessions_app.models import ContextEntry, Session
from sessions_app.services.context.text import Format, payload_parts
from sessions_app.services.proxying.prefix_map import PrefixMap

__all__ = ["clear_cache", "split_context"]

#: Sessions whose split, and rendered heads, are kept in this process.
_KEPT: Final = 256
_HEADS: Final = 32


@dataclass(frozen=True, slots=True)
class _Split:
    revision: int
    #: Position and sequence number of the first entry of the untouched tail.
    position: int
    seq: int
    #: True when the tail is the whole context.
    whole: bool


_lock = threading.Lock()
_splits: OrderedDict[uuid.UUID, _Split] = OrderedDict()
_heads: OrderedDict[tuple[uuid.UUID, int, int, str], list[dict[str, Any]]] = OrderedDict()


def clear_cache() -> None:
    """Forget every kept split and head (tests)."""
    with _lock:
        _splits.clear()
        _heads.clear()


def split_context(
    session: Session, prefix: PrefixMap, fmt: Format
) -> tuple[list[dict[str, Any]] | None, int]:
    """(head in the provider's format, or None when the context is the client's own
    messages; client index where the untouched tail starts). `session`: its
    `context_revision` and `next_seq` as now stored."""
    offset = int((session.proxy_state or {}).get("offset") or 0)
    mine = session.next_seq == offset + prefix.stored  # no message stored around the proxy
    with _lock:
        split = _splits.get(session.pk)
    if split is None or split.revision != session.context_revision or not mine:
        split = _scan(session, offset, prefix)
        if split is None:
            return _rendered(session, None, fmt), prefix.count
        if mine:
            _keep(_splits, session.pk, split, _KEPT)
    tail_start = prefix.start_of(split.seq - offset)
    if tail_start is None:
        return _rendered(session, None, fmt), prefix.count
    if split.whole and tail_start == 0:
        return None, 0
    key = (session.pk, split.revision, split.position, fmt)
    with _lock:
        head = _heads.get(key)
    if head is None:
        head = _rendered(session, split.position, fmt)
        _keep(_heads, key, head, _HEADS)
    return head, tail_start


def _keep(cache: OrderedDict[Any, Any], key: Any, value: Any, size: int) -> None:
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > size:
            cache.popitem(last=False)


def _scan(session: Session, offset: int, prefix: PrefixMap) -> _Split | None:
    """The first entry of the untouched tail: plain messages the proxy stored, in order,
    up to the end (None: there is none)."""
    plain = ExpressionWrapper(Q(content__isnull=True), output_field=BooleanField())
    rows = list(
        ContextEntry.objects.filter(session=session)
        .annotate(plain=plain)
        .order_by("position")
        .values_list("position", "kind", "message__seq", "plain", "extra")
    )
    first = len(rows)
    expected: int | None = None
    while first > 0:
        _position, kind, seq, untransformed, extra = rows[first - 1]
        untouched = kind == ContextEntry.Kind.MESSAGE and untransformed and not extra
        if not untouched or seq is None or prefix.start_of(seq - offset) is None:
            break
        if expected is not None and seq != expected:
            break
        expected = seq - 1
        first -= 1
    if first == len(rows):
        return None
    position, _kind, seq, _plain, _extra = rows[first]
    return _Split(session.context_revision, position, seq, whole=first == 0)


def _rendered(session: Session, before: int | None, fmt: Format) -> list[dict[str, Any]]:
    """The entries before position `before` (None: all) as request messages, without stale
    cache breakpoints."""
    entries = ContextEntry.objects.filter(session=session)
    if before is not None:
        entries = entries.filter(position__lt=before)
    ordered = list(entries.select_related("message").order_by("position"))
    _system, messages, _tokens = payload_parts(ordered, fmt)
    return [_without_cache_control(message) for message in messages]


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(item) for item in value]
    return value
