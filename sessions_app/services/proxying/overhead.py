"""A proxied session's latest model, system prompt and tool definitions
(services/proxying/turns.py).

The model and the counts and digest of the system prompt and tools live in the session's
`proxy_state`; the system prompt and tools themselves in `proxy_overhead`, written (and
counted, services/sessions/overhead.py) only when a request's differ from the stored ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from sessions_app.models import Session
from sessions_app.services.sessions.overhead import overhead_counts, overhead_digest

__all__ = ["Carried", "remember_overhead"]


class Carried(Protocol):
    """What a proxied request carries besides its messages (`proxying.ProxyRequest`)."""

    @property
    def model(self) -> str: ...

    @property
    def system(self) -> Any: ...

    @property
    def tools(self) -> Any: ...


def remember_overhead(
    pk: uuid.UUID, state: dict[str, Any], request: Carried, overhead: str
) -> dict[str, Any] | None:
    """Keep the latest model in `state`, and the counts and digest of the latest system
    prompt and tools (a request without one keeps the stored one). Returns what
    `proxy_overhead` becomes, None when unchanged: an unchanged system and tools are
    neither written nor counted again. `overhead`: the digest of the request's own."""
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
