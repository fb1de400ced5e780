"""The transparent proxy's writes: find or start a proxied session, append, compact, record.

A proxied session keeps `proxy_state` beside its messages: a map of the client messages it
stored, of constant size (running fingerprints of the stored prefix and the digests of its
last messages: services/proxying/prefix_map.py), and the token counts and digest of the latest
system prompt and tool definitions. Those are kept in `proxy_overhead`, written (and counted)
only when a request's differ from the stored ones (docs/architecture.md, "proxy").
The next request continues the session when the stored messages are a prefix of its own;
otherwise (a client that edited or compacted its own history) it starts a new session and
the old one stays as it was. Only the new messages are converted, counted and appended, in
the one transaction that updates the map; the pre-call check sums the stored counts.

The forwarded request replaces the stored messages the runtime context replaced (summaries,
transformed entries) and keeps the client's own messages for the untouched tail, so cache
breakpoints stay where the client put them and the rewritten prefix is byte-stable between
compactions (services/proxying/context.py keeps it per context revision).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from compaction import tool_use_ids
from sessions_app.models import CompactionProfile, Session
from sessions_app.services.compacting.auto import (
    StoredCompaction,
    check_wanted,
    post_call_check,
    precompact,
)
from sessions_app.services.errors import Conflict
from sessions_app.services.proxying.client_compaction import forwarded_as_sent
from sessions_app.services.proxying.context import split_context
from sessions_app.services.proxying.formats import ProxyFormat, context_format
from sessions_app.services.proxying.origin import link_agent_calls, origin_of
from sessions_app.services.proxying.overhead import remember_overhead
from sessions_app.services.proxying.prefix_map import Incoming, PrefixMap
from sessions_app.services.proxying.response_chain import chained
from sessions_app.services.sessions.lifecycle import (
    UNREAD,
    append_locked,
    appended_totals,
    create_session,
    reload_totals,
    sessions_for,
)
from sessions_app.services.sessions.overhead import remembered_overhead_digest
from sessions_app.services.sessions.policies import profile_for
from sessions_app.services.sessions.state import Change, advance
from sessions_app.services.sessions.usage import reported_usage

__all__ = ["ProxyPlan", "ProxyRequest", "plan_request", "record_answer"]

#: How many recent sessions sharing a conversation key are checked for a matching prefix.
_CANDIDATES = 20
#: How many times a request is planned again when its session moved on under it, before
#: it is stored as a session of its own.
_ATTEMPTS = 4


@dataclass(frozen=True)
class ProxyRequest:
    """One proxied request, as the proxy adapters read it (no HTTP, no provider keys)."""

    provider: ProxyFormat
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
    #: remembered for these objects, services/sessions/overhead.py `remembered_overhead_digest`).
    system: Any = None
    tools: Any = None
    #: X-Ctxweb-Mode (`compact` or `observe`); empty: the session profile's `proxy_mode`.
    mode: str = ""
    #: The key sessions stored before the canonical form got (sessions_app/canonical.py),
    #: when it differs from `key`: they are looked for under it too.
    legacy_key: str = ""
    #: A new session's `source_format` when not `provider` (Responses: codex or openai).
    source_format: str = ""
    #: `previous_response_id`: observed only (services/proxying/response_chain.py).
    previous_response: str = ""


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
    #: The request planned, handed to `record_answer`: an answer whose session moved on
    #: without it is stored with the request's messages as a session of its own.
    request: ProxyRequest | None = field(default=None, repr=False, compare=False)


def plan_request(owner: User, request: ProxyRequest) -> ProxyPlan | None:
    """Store what is new in `request` and, when compacting, the context to forward.

    None: a side request of an agent's session (below), forwarded as sent, stored nowhere.
    A session another request of the conversation moved on meanwhile (it no longer
    continues) is looked for again, a few times: the request then maps to another session
    or starts one. One that keeps losing such races is stored as a session of its own: a
    request is never forwarded unrecorded while the database answers (docs/behaviour.md,
    "Concurrent requests of one conversation").
    """
    request = chained(owner, request)  # previous_response_id: observed only
    incoming = Incoming(request.digests)
    overhead = remembered_overhead_digest(request.system, request.tools)
    for _ in range(_ATTEMPTS):
        with contextlib.suppress(Conflict):
            return _plan(owner, request, incoming, overhead)
    return _plan(owner, request, incoming, overhead, alone=True)


def _plan(
    owner: User, request: ProxyRequest, incoming: Incoming, overhead: str, *, alone: bool = False
) -> ProxyPlan | None:
    """`plan_request` once; Conflict when the matched session moved on meanwhile. `alone`:
    in a new session of its own (it cannot conflict: no other request sees it before)."""
    session_id = None if alone else _matching(owner, request, incoming, overhead)
    if session_id is None and not alone and _side_request(owner, request):
        return None
    with transaction.atomic():
        locked = _session_for(owner, request, incoming, overhead, session_id, alone=alone)
        profile = _profile_of(locked)
        state = _state_of(locked, request.provider)
        prefix = PrefixMap.of(state)
        changes: dict[str, Any] = {"proxy_state": state}
        if not _is_retry(state, prefix, incoming, overhead):
            if not prefix.continued_by(incoming):
                raise Conflict("the proxied session changed under the request")
            if _append_new(locked, state, prefix, request, incoming, profile):
                changes.update(appended_totals(locked))
        kept = remember_overhead(locked.pk, state, request, overhead)
        if kept is not None:
            changes["proxy_overhead"] = kept
        _keep_map(state, prefix)
        Session.objects.filter(pk=locked.pk).update(**changes)  # one write of the row
        locked.proxy_state = state
    stored = len(request.digests)
    plan = ProxyPlan(session_id=locked.pk, stored=stored, profile=profile, request=request)
    if (request.mode or profile.proxy_mode) != "compact":  # observe: record only
        return replace(plan, compact=False)
    compaction = None
    if check_wanted(locked, profile):  # the pre-call check, from the stored counts
        compaction = precompact(locked, profile).stored  # docs/behaviour.md#prepared-compaction
        reload_totals(locked)
    head, tail_start = split_context(locked, prefix, context_format(request.provider))
    # a retry with its answer in the rewritten part; a window after the client's compaction
    if tail_start > stored or forwarded_as_sent(locked):
        head, tail_start = None, 0
    return replace(plan, head=head, tail_start=tail_start, compaction=compaction)


def record_answer(
    session_id: uuid.UUID,
    stored: int,
    message: Mapping[str, Any],
    digest: str,
    *,
    compact: bool = True,
    profile: CompactionProfile | None = None,
    request: ProxyRequest | None = None,
) -> bool:
    """Append the model's answer (`message`, with its real usage) after the request's
    messages; then the post-call check may queue a compaction. False when the session was
    deleted meanwhile, or moved on without this answer and `request` is None.

    The answer to a retry (the request's messages are the stored ones minus the stored
    answer) is not stored again: its digest becomes an alias of the stored answer, so the
    client's next request, which carries this answer, continues the session. An answer the
    session already holds (another client's identical one) is not stored again either.
    When other requests of the conversation moved the session on without this answer, the
    request's messages and the answer are stored as a session of their own (`request`: the
    plan's, `ProxyPlan.request`): the client's next request continues that one.

    `profile`: the one the request's plan read (`ProxyPlan.profile`); None: read now."""
    answer = dict(message)
    with transaction.atomic():
        locked = _locked(session_id)
        if locked is None:
            return False
        recorded = _record_locked(locked, stored, answer, digest, compact, profile)
    if recorded is None:
        return request is not None and _record_alone(locked, request, answer, digest, compact)
    answered, over = recorded
    if over:  # the post-call check queues the compaction (the usage is recorded already)
        post_call_check(locked, [answer])
    if answered:  # a subagent that started before this answer was stored gets its call
        link_agent_calls(locked, answer.get("content"))
    return True


def _record_locked(
    locked: Session,
    stored: int,
    answer: dict[str, Any],
    digest: str,
    compact: bool,
    profile: CompactionProfile | None,
) -> tuple[bool, bool] | None:
    """`record_answer` in its transaction: whether the answer was appended, and whether the
    post-call check is to queue a compaction; None: the session moved on without it."""
    state = dict(locked.proxy_state or {})
    prefix = PrefixMap.of(state)
    changes: dict[str, Any] = {"proxy_state": state}
    if prefix.count == stored + 1 and prefix.answered == stored:
        prefix.add_alias(stored, digest)
        answered = False
    elif prefix.count == stored:
        profile = profile or _profile_of(locked)
        _append(locked, state, [answer], profile)
        changes.update(appended_totals(locked))
        prefix.add_answer(digest)
        answered = True
    else:
        return (False, False) if _holds(prefix, stored, digest) else None
    _keep_map(state, prefix)
    usage = reported_usage([answer]) if answered and compact else None
    over = False
    if usage is not None:  # what post_call_check records, in this transaction
        changes.update(advance(locked, Change(usage=usage)))
        over = check_wanted(locked, profile or _profile_of(locked), usage["total_tokens"])
    Session.objects.filter(pk=locked.pk).update(**changes)
    return answered, over


def _holds(prefix: PrefixMap, index: int, digest: str) -> bool:
    """True when the session's client message at `index` (still in the map's window) is
    the answer with `digest`, or has it as an alias."""
    if not prefix.start <= index < prefix.count:
        return False
    return digest == prefix.digests[index - prefix.start] or digest in prefix.aliases.get(
        str(index), ()
    )


def _record_alone(
    moved: Session, request: ProxyRequest, answer: dict[str, Any], digest: str, compact: bool
) -> bool:
    """The request's messages then its answer, as a session of their own (the one planned,
    `moved`, went on without this answer); no compaction before the answer is stored."""
    owner = User.objects.get(pk=moved.owner_id)
    overhead = remembered_overhead_digest(request.system, request.tools)
    observed = replace(request, mode="observe")
    plan = _plan(owner, observed, Incoming(request.digests), overhead, alone=True)
    if plan is None:  # never, when alone
        return False
    return record_answer(plan.session_id, plan.stored, answer, digest, compact=compact)


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


def _session_for(
    owner: User,
    request: ProxyRequest,
    incoming: Incoming,
    overhead: str,
    session_id: uuid.UUID | None,
    *,
    alone: bool,
) -> Session:
    """The session to store the request in, locked for the caller's transaction: that of
    `session_id`, else one started in this transaction (filled before any other request
    can see it). Unless `alone`, starts are taken in turn per owner (the owner's row is
    locked until the transaction ends; SQLite writes in turn anyway) and the session is
    looked for again first: a client sending the same first request twice at once, or a
    request that lost its session to another one, finds the session started meanwhile
    whole, never a new one still empty (which any request would continue)."""
    if session_id is None and not alone:
        list(User.objects.select_for_update().filter(pk=owner.pk).values_list("pk", flat=True))
        session_id = _matching(owner, request, incoming, overhead)
    if session_id is None:
        session_id = _started(owner, request).pk
    locked = _locked(session_id)
    if locked is None:
        raise Conflict("the proxied session was deleted under the request")
    return locked


def _started(owner: User, request: ProxyRequest) -> Session:
    """A new proxied session, titled from the conversation's first user message; a Claude
    Code subagent's is linked to the conversation that started it (services/proxying/origin.py)."""
    title = request.title[:300]
    origin = origin_of(owner, request.key, request.tools, request.system, title)
    session = create_session(
        owner,
        title=origin.title(title)[:300],
        source_format=request.source_format or request.provider,
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
