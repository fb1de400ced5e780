"""The transparent proxy's writes: find or start a proxied session, append, compact, record.

A proxied session keeps `proxy_state` beside its messages: the digest of every client message
it stored (sessions_app/proxy/digests.py), the client index each stored message starts at,
and the latest system prompt and tool definitions. The next request continues the session
when the stored digests are a prefix of its own; otherwise (a client that edited or compacted
its own history) it starts a new session and the old one stays as it was.

The forwarded request replaces the stored messages the runtime context replaced (summaries,
transformed entries) and keeps the client's own messages for the untouched tail, so cache
breakpoints stay where the client put them and the rewritten prefix is byte-stable between
compactions.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, Q

from ..models import ContextEntry, Session
from .auto import StoredCompaction, post_call_check, prepare_context
from .context import check
from .context_text import Format, payload_parts
from .errors import Conflict
from .overhead import count_overhead, overhead_digest
from .policies import profile_for
from .sessions import append_messages, create_session, sessions_for

__all__ = ["ProxyPlan", "ProxyRequest", "plan_request", "record_answer"]

#: How many recent sessions sharing a conversation key are checked for a matching prefix.
_CANDIDATES = 20


@dataclass(frozen=True)
class ProxyRequest:
    """One proxied request, as the proxy adapters read it (no HTTP, no provider keys)."""

    provider: Format
    key: str
    #: The client's messages' digests (sessions_app/proxy/digests.py), with `.raw`: the
    #: digest of each as sent, compared first (a sequence that digests on demand).
    digests: Sequence[str]
    #: The client's messages from a client index on, as stored engine messages (one list
    #: per client message; an empty list: joined to the previous one).
    convert: Callable[[int], list[list[dict[str, Any]]]]
    title: str = ""
    model: str = ""
    name: str = ""
    external_id: str = ""
    system: Any = None
    tools: Any = None
    #: X-Ctxweb-Mode (`compact` or `observe`); empty: the session profile's `proxy_mode`.
    mode: str = ""


@dataclass(frozen=True)
class ProxyPlan:
    """What to forward: `head` (the runtime context's replaced part, in the provider's format)
    then the client's messages from `tail_start`; `head` None: forward the request as sent."""

    session_id: uuid.UUID
    stored: int
    head: list[dict[str, Any]] | None = None
    tail_start: int = 0
    compaction: StoredCompaction | None = field(default=None)
    #: False in observe mode: forwarded as sent, and no post-call check.
    compact: bool = True


def plan_request(owner: User, request: ProxyRequest) -> ProxyPlan | None:
    """Store what is new in `request` and, when compacting, the context to forward.

    None: a side request of an agent's session (below), forwarded as sent, stored nowhere.
    """
    session = _matching(owner, request)
    if session is None:
        if _side_request(owner, request):
            return None
        session = _started(owner, request)
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        state = _state_of(locked, request.provider)
        if not _is_retry(state, request):
            if not _continues(state, request.digests):
                raise Conflict("the proxied session changed under the request")
            _append_new(locked, state, request)
        _remember(state, request)
        Session.objects.filter(pk=locked.pk).update(proxy_state=state)
        locked.proxy_state = state
    stored, profile = len(request.digests), profile_for(locked)
    if (request.mode or profile.proxy_mode) != "compact":  # observe: record only
        return ProxyPlan(session_id=locked.pk, stored=stored, compact=False)
    compaction = None
    if check(locked, profile).should_compact:  # the pre-call check: compact first when over
        compaction = prepare_context(locked, fmt=request.provider).compaction
    head, tail_start = _split_context(locked, state, request.provider)
    if tail_start > stored:  # a retry whose stored answer is in the rewritten part
        head, tail_start = None, 0
    return ProxyPlan(
        session_id=locked.pk,
        stored=stored,
        head=head,
        tail_start=tail_start,
        compaction=compaction,
    )


def record_answer(
    session_id: uuid.UUID,
    stored: int,
    message: Mapping[str, Any],
    digest: str,
    *,
    compact: bool = True,
) -> bool:
    """Append the model's answer (`message`, with its real usage) after the request's
    messages; then the post-call check may queue a compaction. False when the session moved
    on meanwhile (another request of the same conversation answered first).

    The answer to a retry (the request's messages are the stored ones minus the stored
    answer) is not stored again: its digest becomes an alias of the stored answer, so the
    client's next request, which carries this answer, continues the session."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().filter(pk=session_id).first()
        state = dict(locked.proxy_state or {}) if locked is not None else {}
        known = len(state.get("digests") or [])
        if locked is not None and known == stored + 1 and state.get("answered") == stored:
            aliases = dict(state.get("aliases") or {})
            if digest != state["digests"][stored]:
                aliases[str(stored)] = [*aliases.get(str(stored), []), digest][-8:]
            Session.objects.filter(pk=locked.pk).update(proxy_state={**state, "aliases": aliases})
            return True
        if locked is None or known != stored:
            return False
        append_messages(locked, [dict(message)])
        state["digests"] = [*state["digests"], digest]
        if len(state.get("raw") or []) == stored:  # the client's copy will be re-serialized
            state["raw"] = [*state["raw"], ""]
        state["starts"] = [*state.get("starts", []), stored]
        state["answered"] = stored
        Session.objects.filter(pk=locked.pk).update(proxy_state=state)
    if compact:
        post_call_check(locked, [dict(message)])
    return True


def _append_new(locked: Session, state: dict[str, Any], request: ProxyRequest) -> None:
    """Append the request's messages beyond the stored ones; its digests become the state's."""
    groups = request.convert(len(state["digests"]))
    messages = [message for group in groups for message in group]
    known = len(state["digests"])
    for index, group in enumerate(groups, start=known):
        state["starts"].extend([index] * len(group))
    if messages:
        append_messages(locked, messages)
    # The stored digests stand (they matched); the new messages' are added.
    state["digests"] = [*state["digests"], *request.digests[known:]]
    state["raw"] = list(getattr(request.digests, "raw", []))


def _continues(state: Mapping[str, Any], incoming: Sequence[str]) -> bool:
    """True when the stored digests are a prefix of `incoming` (a retried answer's alias
    stands for the stored answer)."""
    stored = list(state.get("digests") or [])
    if len(stored) > len(incoming):
        return False
    known, raw = list(state.get("raw") or []), list(getattr(incoming, "raw", []))
    aliases = state.get("aliases") or {}
    for index, mine in enumerate(stored):
        if index < len(known) and index < len(raw) and known[index] == raw[index]:
            continue  # sent exactly as before: no need to normalize it
        theirs = incoming[index]
        if mine != theirs and theirs not in aliases.get(str(index), ()):
            return False
    return True


def _is_retry(state: Mapping[str, Any], request: ProxyRequest) -> bool:
    """The same request again after its answer was stored: the stored digests minus that
    last answer, with the same system prompt and tools."""
    stored, incoming = list(state.get("digests") or []), request.digests
    return (
        bool(stored)
        and state.get("answered") == len(stored) - 1
        and len(incoming) == len(stored) - 1
        and state.get("overhead_digest") == overhead_digest(request.system, request.tools)
        and _continues({**state, "digests": stored[:-1]}, incoming)
    )


def _side_request(owner: User, request: ProxyRequest) -> bool:
    """A Claude Code side request (title generation, quota and topic checks): no tools,
    continuing none of the sessions of a Claude Code session id whose main conversation has
    tools. Storing each would leave a stray one-message session per request."""
    if not request.key.startswith("cc:") or request.tools:
        return False
    siblings = sessions_for(owner).filter(proxy_key=request.key[:200])
    return siblings.filter(proxy_state__has_key="tools").exists()


def _matching(owner: User, request: ProxyRequest) -> Session | None:
    """The most recent session of this conversation whose stored messages the request
    continues or retries (a named or identified session first)."""
    mine = sessions_for(owner)
    candidates: list[Session] = []
    if request.name:
        with contextlib.suppress(ValueError):
            candidates.extend(mine.filter(pk=uuid.UUID(request.name)))
    candidates.extend(mine.filter(proxy_key=request.key).order_by("-updated_at")[:_CANDIDATES])
    for session in candidates:
        state = session.proxy_state or {}
        if state and state.get("provider") != request.provider:
            continue
        if _continues(state, request.digests) or _is_retry(state, request):
            return session
    return None


def _started(owner: User, request: ProxyRequest) -> Session:
    """A new proxied session, titled from the conversation's first user message."""
    session = create_session(
        owner,
        title=request.title[:300],
        source_format=request.provider,
        model=request.model[:128],
        external_id=request.external_id[:200],
        metadata={"proxy": request.provider},
    )
    state = _state_of(session, request.provider)
    Session.objects.filter(pk=session.pk).update(proxy_key=request.key[:200], proxy_state=state)
    session.proxy_key, session.proxy_state = request.key[:200], state
    return session


def _state_of(session: Session, provider: str) -> dict[str, Any]:
    """The session's proxy bookkeeping, started at its current end when it has none."""
    state = dict(session.proxy_state or {})
    if not state:
        state = {"provider": provider, "offset": session.next_seq, "digests": [], "starts": []}
    state["starts"] = list(state.get("starts") or [])
    return state


def _remember(state: dict[str, Any], request: ProxyRequest) -> None:
    """Keep the latest system prompt and tool definitions with the session."""
    if request.system is not None:
        state["system"] = request.system
    if request.tools is not None:
        state["tools"] = request.tools
    if request.model:
        state["model"] = request.model
    count_overhead(state)


def _split_context(
    session: Session, state: Mapping[str, Any], fmt: Format
) -> tuple[list[dict[str, Any]] | None, int]:
    """(head in the provider's format or None when the context is the client's own
    messages, client index where the untouched tail starts).

    The tail is found from the entries' kinds and sequence numbers alone (no content is
    read); only the rewritten head, when there is one, is loaded and rendered."""
    plain = ExpressionWrapper(Q(content__isnull=True), output_field=BooleanField())
    rows = list(
        ContextEntry.objects.filter(session=session)
        .annotate(plain=plain)
        .order_by("position")
        .values_list("position", "kind", "message__seq", "plain", "extra")
    )
    offset, starts = int(state.get("offset") or 0), list(state.get("starts") or [])
    first = len(rows)
    expected: int | None = None
    while first > 0:
        _position, kind, seq, untransformed, extra = rows[first - 1]
        untouched = kind == ContextEntry.Kind.MESSAGE and untransformed and not extra
        if not untouched or seq is None or not 0 <= seq - offset < len(starts):
            break
        if expected is not None and seq != expected:
            break
        expected = seq - 1
        first -= 1
    if first == len(rows):
        return _head(session, None, fmt), len(state.get("digests") or [])
    tail_start = starts[rows[first][2] - offset]
    if first == 0 and tail_start == 0:
        return None, 0
    return _head(session, rows[first][0], fmt), tail_start


def _head(session: Session, before: int | None, fmt: Format) -> list[dict[str, Any]]:
    """The entries before position `before` (None: all), rendered."""
    entries = ContextEntry.objects.filter(session=session)
    if before is not None:
        entries = entries.filter(position__lt=before)
    return _rendered(list(entries.select_related("message").order_by("position")), fmt)


def _rendered(entries: Sequence[ContextEntry], fmt: Format) -> list[dict[str, Any]]:
    """The entries as request messages, without stale cache breakpoints."""
    _system, messages, _tokens = payload_parts(entries, fmt)
    return [_without_cache_control(message) for message in messages]


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(item) for item in value]
    return value
