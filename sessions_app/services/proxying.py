"""The transparent proxy's writes: find or start a proxied session, append, compact, record.

A proxied session keeps `proxy_state` beside its messages: a map of the client messages it
stored, of constant size (running fingerprints of the stored prefix and the digests of its
last messages: services/proxy_map.py), and the token counts and digest of the latest system
prompt and tool definitions. Those themselves are kept in `proxy_overhead`, written (and
counted) only when a request's differ from the stored ones: an agent that sends the same
50-100 KB with every request costs one digest of them per request.
The next request continues the session when the stored messages are a prefix of its own;
otherwise (a client that edited or compacted its own history) it starts a new session and
the old one stays as it was. Only the new messages are converted, counted and appended, in
the one transaction that updates the map; the pre-call check sums the stored counts.

The forwarded request replaces the stored messages the runtime context replaced (summaries,
transformed entries) and keeps the client's own messages for the untouched tail, so cache
breakpoints stay where the client put them and the rewritten prefix is byte-stable between
compactions (services/proxy_context.py keeps it per context revision).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from compaction import tool_use_ids

from ..models import CompactionProfile, Session
from .auto import StoredCompaction, post_call_check, prepare_context
from .context_text import Format
from .errors import Conflict
from .overhead import (
    overhead_counts,
    overhead_digest,
    remembered_overhead_digest,
)
from .policies import policy_for, profile_for
from .proxy_context import split_context
from .proxy_map import Incoming, PrefixMap
from .proxy_origin import link_agent_calls, origin_of
from .sessions import (
    UNREAD,
    append_locked,
    appended_totals,
    create_session,
    refresh_totals,
    sessions_for,
)
from .usage import reported_usage

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
    #: The system prompt and tool definitions as sent: never changed (their digest is
    #: remembered for these objects, services/overhead.py `remembered_overhead_digest`).
    system: Any = None
    tools: Any = None
    #: X-Ctxweb-Mode (`compact` or `observe`); empty: the session profile's `proxy_mode`.
    mode: str = ""
    #: The key sessions stored before the canonical form got (sessions_app/canonical.py),
    #: when it differs from `key`: they are looked for under it too.
    legacy_key: str = ""


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
    #: The profile read for this request, handed to `record_answer` (read once per request).
    profile: CompactionProfile | None = None


def plan_request(owner: User, request: ProxyRequest) -> ProxyPlan | None:
    """Store what is new in `request` and, when compacting, the context to forward.

    None: a side request of an agent's session (below), forwarded as sent, stored nowhere.
    A session another request of the conversation moved on meanwhile (it no longer
    continues) is looked for again once: the request then maps to another session or starts
    one.
    """
    incoming = Incoming(request.digests)
    overhead = remembered_overhead_digest(request.system, request.tools)
    try:
        return _plan(owner, request, incoming, overhead)
    except Conflict:
        return _plan(owner, request, incoming, overhead)


def _plan(
    owner: User, request: ProxyRequest, incoming: Incoming, overhead: str
) -> ProxyPlan | None:
    session_id = _matching(owner, request, incoming, overhead)
    if session_id is None:
        if _side_request(owner, request):
            return None
        session_id = _started_once(owner, request, incoming, overhead)
    with transaction.atomic():
        locked = _locked(session_id)
        if locked is None:
            raise Conflict("the proxied session was deleted under the request")
        profile = _profile_of(locked)
        state = _state_of(locked, request.provider)
        prefix = PrefixMap.of(state)
        changes: dict[str, Any] = {"proxy_state": state}
        if not _is_retry(state, prefix, incoming, overhead):
            if not prefix.continued_by(incoming):
                raise Conflict("the proxied session changed under the request")
            if _append_new(locked, state, prefix, request, incoming, profile):
                changes.update(appended_totals(locked))
        kept = _remember(locked.pk, state, request, overhead)
        if kept is not None:
            changes["proxy_overhead"] = kept
        _keep_map(state, prefix)
        Session.objects.filter(pk=locked.pk).update(**changes)  # one write of the row
        locked.proxy_state = state
    stored = len(request.digests)
    if (request.mode or profile.proxy_mode) != "compact":  # observe: record only
        return ProxyPlan(session_id=locked.pk, stored=stored, compact=False, profile=profile)
    compaction = None
    if _over(locked, profile):  # the pre-call check, from the stored counts
        compaction = prepare_context(locked, fmt=request.provider).compaction
        refresh_totals(locked)
    head, tail_start = split_context(locked, prefix, request.provider)
    if tail_start > stored:  # a retry whose stored answer is in the rewritten part
        head, tail_start = None, 0
    return ProxyPlan(
        session_id=locked.pk,
        stored=stored,
        head=head,
        tail_start=tail_start,
        compaction=compaction,
        profile=profile,
    )


def record_answer(
    session_id: uuid.UUID,
    stored: int,
    message: Mapping[str, Any],
    digest: str,
    *,
    compact: bool = True,
    profile: CompactionProfile | None = None,
) -> bool:
    """Append the model's answer (`message`, with its real usage) after the request's
    messages; then the post-call check may queue a compaction. False when the session moved
    on meanwhile (another request of the same conversation answered first).

    The answer to a retry (the request's messages are the stored ones minus the stored
    answer) is not stored again: its digest becomes an alias of the stored answer, so the
    client's next request, which carries this answer, continues the session.

    `profile`: the one the request's plan read (`ProxyPlan.profile`); None: read now."""
    with transaction.atomic():
        locked = _locked(session_id)
        if locked is None:
            return False
        state = dict(locked.proxy_state or {})
        prefix = PrefixMap.of(state)
        changes: dict[str, Any] = {"proxy_state": state}
        if prefix.count == stored + 1 and prefix.answered == stored:
            prefix.add_alias(stored, digest)
            answered = False
        elif prefix.count == stored:
            profile = profile or _profile_of(locked)
            _append(locked, state, [dict(message)], profile)
            changes.update(appended_totals(locked))
            prefix.add_answer(digest)
            answered = True
        else:
            return False
        _keep_map(state, prefix)
        usage = reported_usage([message]) if answered and compact else None
        over = False
        if usage is not None:  # what post_call_check records, in this transaction
            locked.last_usage = changes["last_usage"] = usage
            policy = policy_for(locked, profile or _profile_of(locked))
            over = policy.enabled and policy.scaled(usage["total_tokens"]) >= policy.threshold
        Session.objects.filter(pk=locked.pk).update(**changes)
    if over:  # the post-call check queues the compaction (the usage is recorded already)
        post_call_check(locked, [dict(message)])
    if answered:  # a subagent that started before this answer was stored gets its call
        link_agent_calls(locked, message.get("content"))
    return True


def _keep_map(state: dict[str, Any], prefix: PrefixMap) -> None:
    """`prefix` into `state`, without the lists of the first format."""
    for key in ("digests", "raw", "starts", "aliases", "answered"):
        state.pop(key, None)
    state["map"] = prefix.to_state()


def _locked(pk: uuid.UUID) -> Session | None:
    """The session, locked for this transaction, without its stored system prompt and
    tools (read only when a request changes one of them). Not joined with its profile:
    most sessions have none (the default one is read instead), and the join cost more
    to build than the query it saved."""
    return Session.objects.select_for_update().defer("proxy_overhead").filter(pk=pk).first()


def _profile_of(session: Session) -> CompactionProfile:
    """The session's profile, else the default one (one query)."""
    return profile_for(session)


def _over(session: Session, profile: CompactionProfile) -> bool:
    """The pre-call check (`services.context.check`) from the locked session's counts."""
    policy = policy_for(session, profile)  # its reserved tokens: the session's overhead
    return policy.enabled and policy.over_threshold(session.context_tokens)


def _append_new(
    locked: Session,
    state: dict[str, Any],
    prefix: PrefixMap,
    request: ProxyRequest,
    incoming: Incoming,
    profile: CompactionProfile,
) -> bool:
    """Append the request's messages beyond the stored ones; the map takes them. True when
    messages were appended (the session's totals are then to be saved)."""
    groups = request.convert(prefix.count)
    messages = [message for group in groups for message in group]
    starts = [index for index, group in enumerate(groups, start=prefix.count) for _ in group]
    if messages:
        _append(locked, state, messages, profile)
    prefix.add_starts(starts)
    prefix.extend(incoming)
    return bool(messages)


def _append(
    locked: Session,
    state: dict[str, Any],
    messages: list[dict[str, Any]],
    profile: CompactionProfile,
) -> None:
    """`append_locked` without saving the totals (the caller's one UPDATE of the row does),
    after the context's last message as the proxy left it when nothing changed since;
    then the last one appended is remembered in `state` for the next append."""
    append_locked(locked, messages, profile=profile, previous=_previous(state, locked), save=False)
    last = messages[-1]
    role = last.get("role")
    uses = tool_use_ids(last) if role == "assistant" else []
    state["last"] = {"version": locked.version, "role": role, "tool_use_ids": uses}


def _previous(state: Mapping[str, Any], locked: Session) -> Mapping[str, Any] | object:
    """The message the context ends with, as the proxy's own last append left it (the
    session's version unchanged since: nothing else was appended, compacted, reverted or
    offloaded), reduced to what validating an extension reads (its role, an assistant's
    tool_use ids); else UNREAD (`append_locked` reads it)."""
    last = state.get("last")
    if not isinstance(last, Mapping) or last.get("version") != locked.version:
        return UNREAD
    role, ids = last.get("role"), last.get("tool_use_ids")
    if not isinstance(role, str) or not isinstance(ids, list):
        return UNREAD
    if role != "assistant" or not ids:
        return {"role": role, "content": "(stored message)"}
    uses = [{"type": "tool_use", "id": str(i), "name": "stored", "input": {}} for i in ids]
    return {"role": role, "content": uses}


def _is_retry(
    state: Mapping[str, Any], prefix: PrefixMap, incoming: Incoming, overhead: str
) -> bool:
    """The same request again after its answer was stored: the stored messages minus that
    last answer, with the same system prompt and tools (`overhead`: their digest)."""
    return (
        prefix.count > 0
        and prefix.answered == prefix.count - 1
        and len(incoming) == prefix.count - 1
        and state.get("overhead_digest") == overhead
        and prefix.continued_by(incoming, prefix.count - 1)
    )


def _side_request(owner: User, request: ProxyRequest) -> bool:
    """A Claude Code side request (title generation, quota and topic checks): no tools,
    continuing none of the sessions of a Claude Code session id whose main conversation has
    tools. Storing each would leave a stray one-message session per request."""
    if not request.key.startswith("cc:") or request.tools:
        return False
    siblings = sessions_for(owner).filter(proxy_key=request.key[:200])
    return siblings.filter(proxy_overhead__has_key="tools").exists()


def _matching(
    owner: User, request: ProxyRequest, incoming: Incoming, overhead: str
) -> uuid.UUID | None:
    """The most recent session of this conversation whose stored messages the request
    continues or retries (a named or identified session first). Each candidate's
    `proxy_state` is read whole (its map and counts, a few KB: one plain column is cheaper
    to select than its keys one by one), not its stored system prompt and tools."""
    mine = sessions_for(owner)
    rows: list[tuple[uuid.UUID, Any]] = []
    if request.name:
        with contextlib.suppress(ValueError):
            rows.extend(mine.filter(pk=uuid.UUID(request.name)).values_list("pk", "proxy_state"))
    keys = {request.key, request.legacy_key} - {""}
    keyed = mine.filter(proxy_key__in=keys).order_by("-updated_at")
    rows.extend(keyed.values_list("pk", "proxy_state")[:_CANDIDATES])
    for pk, kept in rows:
        state = kept if isinstance(kept, Mapping) else {}
        provider = state.get("provider")
        if provider is not None and provider != request.provider:
            continue
        prefix = PrefixMap.of(state)
        if prefix.continued_by(incoming) or _is_retry(state, prefix, incoming, overhead):
            return pk
    return None


def _started_once(
    owner: User, request: ProxyRequest, incoming: Incoming, overhead: str
) -> uuid.UUID:
    """A new session for the request, unless another request of the same conversation
    started one meanwhile (a client sending the same first request twice at once): starts
    are taken in turn per owner (the owner's row is locked; SQLite writes in turn anyway)
    and the session looked for again, then made with its key in one transaction."""
    with transaction.atomic():
        list(User.objects.select_for_update().filter(pk=owner.pk).values_list("pk", flat=True))
        found = _matching(owner, request, incoming, overhead)
        return found if found is not None else _started(owner, request).pk


def _started(owner: User, request: ProxyRequest) -> Session:
    """A new proxied session, titled from the conversation's first user message; a Claude
    Code subagent's is linked to the conversation that started it (services/proxy_origin.py)."""
    title = request.title[:300]
    origin = origin_of(owner, request.key, request.tools, request.system, title)
    session = create_session(
        owner,
        title=origin.title(title)[:300],
        source_format=request.provider,
        model=request.model[:128],
        external_id=request.external_id[:200],
        metadata={"proxy": request.provider},
        parent=origin.parent,
        parent_tool_use_id=origin.tool_use_id[:200],
    )
    state = _state_of(session, request.provider)
    Session.objects.filter(pk=session.pk).update(proxy_key=request.key[:200], proxy_state=state)
    session.proxy_key, session.proxy_state = request.key[:200], state
    return session


def _state_of(session: Session, provider: str) -> dict[str, Any]:
    """The session's proxy bookkeeping, started at its current end when it has none."""
    state = dict(session.proxy_state or {})
    if not state:
        state = {"provider": provider, "offset": session.next_seq}
    return state


def _remember(
    pk: uuid.UUID, state: dict[str, Any], request: ProxyRequest, overhead: str
) -> dict[str, Any] | None:
    """Keep the latest model in `state`, and the counts and digest of the latest system
    prompt and tools (a request without one keeps the stored one). Returns what
    `proxy_overhead` becomes, None when unchanged: an unchanged system and tools are
    neither written nor counted again."""
    if request.model:
        state["model"] = request.model
    legacy = {key: state.pop(key) for key in ("system", "tools") if key in state}
    if request.system is None and request.tools is None and not legacy:
        if "overhead_digest" not in state:  # none yet: a retry compares the digest of none
            state.update(system_tokens=0, tools_tokens=0, overhead_digest=overhead)
        return None
    if request.system is not None and request.tools is not None:
        system, tools, digest = request.system, request.tools, overhead
    else:  # one of them kept from before: read the stored ones (rare)
        stored = legacy or _stored_overhead(pk)
        system = request.system if request.system is not None else stored.get("system")
        tools = request.tools if request.tools is not None else stored.get("tools")
        digest = overhead_digest(system, tools)
    if state.get("overhead_digest") == digest and not legacy:
        return None
    state.update(overhead_counts(system, tools))
    state["overhead_digest"] = digest
    kept = {"system": system, "tools": tools}
    return {key: value for key, value in kept.items() if value is not None}


def _stored_overhead(pk: uuid.UUID) -> dict[str, Any]:
    rows = Session.objects.filter(pk=pk).values_list("proxy_overhead", flat=True)
    stored = rows.first()
    return dict(stored) if isinstance(stored, Mapping) else {}
