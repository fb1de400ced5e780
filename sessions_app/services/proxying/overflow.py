"""The proxy's retry after the upstream refused a request as too long
(docs/behaviour.md#overflow-recovery).

The request's messages are stored already (its plan's `stored` count) and its answer is
not: `replan_after_overflow` compacts the session harder
(services/compacting/overflow.py) and gives the plan of the one retry, whose answer
`record_answer` stores once, as any answer. Nothing of the request is stored again.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from sessions_app.models import Session
from sessions_app.services.compacting.auto import PreCall
from sessions_app.services.compacting.overflow import compact_after_overflow
from sessions_app.services.errors import ServiceError
from sessions_app.services.proxying.client_compaction import forwarded_as_sent
from sessions_app.services.proxying.context import split_context
from sessions_app.services.proxying.formats import context_format
from sessions_app.services.proxying.prefix_map import PrefixMap
from sessions_app.services.proxying.turns import ProxyPlan
from sessions_app.services.sessions.policies import profile_for

__all__ = ["replan_after_overflow"]

logger = logging.getLogger("sessions_app")


def replan_after_overflow(
    plan: ProxyPlan, *, limit: int | None = None, counted: int | None = None
) -> ProxyPlan | None:
    """The plan of the retry of `plan`'s request, which the upstream refused as too long
    (`limit`: the window it named, `counted`: its count of the request, when it said them).

    None when there is nothing to retry with: observe mode, the session gone or changed by
    another request meanwhile, or a context that could not be made smaller (the retry
    would be refused the same way); the client then gets the upstream's own error.
    """
    if not plan.compact or plan.request is None:
        return None
    session = Session.objects.filter(pk=plan.session_id).first()
    if session is None:
        return None
    revision = session.context_revision
    profile = plan.profile or profile_for(session)
    try:
        stored = compact_after_overflow(session, profile, limit=limit, counted=counted)
    except ServiceError as error:
        logger.warning(
            "overflow recovery failed: %s",
            error,
            extra={"session_id": str(session.pk), "trigger": "overflow", "outcome": "failed"},
        )
        return None
    session.refresh_from_db()
    if session.context_revision == revision:
        return None
    prefix = PrefixMap.of(dict(session.proxy_state or {}))
    head, tail_start = split_context(session, prefix, context_format(plan.request.provider))
    if head is None or tail_start > plan.stored or forwarded_as_sent(session):
        return None
    return replace(plan, head=head, tail_start=tail_start, compaction=PreCall(stored, None).stored)
