"""A Responses request that continues a response the server keeps (`previous_response_id`).

Such a request sends only its new items: the earlier turns are on the server, where ctxweb
cannot replace them. So it is observed only (forwarded as sent, never compacted: README,
"Point an agent at the proxy"), and its items are appended to the session holding the
response it continues (the stored answer whose id is `previous_response_id`, when it is
the session's last message): that session's prefix map starts again at its end, so the
request's items continue it. A response ctxweb did not store (or one already continued)
leaves the request to the usual matching.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Protocol, TypeVar

from django.contrib.auth.models import User
from django.db import transaction

from sessions_app.models import Message, Session
from sessions_app.services.proxying.client_compaction import restarted_state
from sessions_app.services.sessions.lifecycle import sessions_for

__all__ = ["chained", "continued_session"]


class _Chained(Protocol):
    @property
    def previous_response(self) -> str: ...
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=_Chained)


def chained(owner: User, request: R) -> R:
    """`request` (services/proxying/turns.py `ProxyRequest`) as planned: with a previous
    response, observed only, and named after the session of that response when there is
    one; else as it is."""
    if not request.previous_response:
        return request
    continued = continued_session(owner, request.previous_response)
    name = str(continued) if continued is not None else request.name
    return replace(request, mode="observe", name=name)  # type: ignore[type-var]


def continued_session(owner: User, response_id: str) -> uuid.UUID | None:
    """The session whose last message is the stored answer `response_id`, its prefix map
    restarted at its end; None when there is none."""
    if not response_id:
        return None
    answers = Message.objects.filter(
        session__in=sessions_for(owner), role="assistant", original_id=response_id[:200]
    )
    found = answers.order_by("-seq").values_list("session_id", "seq").first()
    if found is None:
        return None
    session_id, seq = found
    with transaction.atomic():
        locked = Session.objects.select_for_update().filter(pk=session_id).first()
        if locked is None or locked.next_seq != seq + 1:  # continued already: not again
            return None
        state = restarted_state(locked.proxy_state, locked.next_seq)
        Session.objects.filter(pk=locked.pk).update(proxy_state=state)
    return session_id
