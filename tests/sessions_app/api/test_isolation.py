"""Another owner's session (and job) is a 404 on every endpoint and method; nothing changes."""

from __future__ import annotations

from typing import Any

import pytest

from compaction import ScriptedSummarizer
from sessions_app.models import Compaction, Message, Session
from sessions_app.services.background.jobs import enqueue_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db

ROUTES = [
    ("get", "/api/sessions/{sid}", None),
    ("delete", "/api/sessions/{sid}", None),
    ("post", "/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "x"}]}),
    ("get", "/api/sessions/{sid}/history", None),
    ("get", "/api/sessions/{sid}/context", None),
    ("post", "/api/sessions/{sid}/context/prepare", None),
    ("post", "/api/sessions/{sid}/check", None),
    ("post", "/api/sessions/{sid}/compactions", {}),
    ("post", "/api/sessions/{sid}/compactions", {"background": True}),
    ("get", "/api/sessions/{sid}/compactions", None),
    ("get", "/api/sessions/{sid}/compactions/1", None),
    ("post", "/api/sessions/{sid}/compactions/1/revert", None),
    ("post", "/api/sessions/{sid}/offload", {}),
    ("get", "/api/jobs/{job}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_another_owners_ids_are_404(
    other_client: JsonClient,
    make_session: Any,
    make_profile: Any,
    conversation: Any,
    method: str,
    path: str,
    body: Any,
) -> None:
    profile = make_profile(keep_recent_messages=4, steps=["summary"])
    session = make_session(messages=conversation(12), context_limit=3000, profile=profile)
    compact_session(session, summarizer=ScriptedSummarizer(default="s"))
    job = enqueue_compaction(session, params={})
    before = (
        Session.objects.get(pk=session.pk).version,
        Message.objects.count(),
        list(Compaction.objects.values_list("number", "status")),
    )
    target = path.format(sid=session.pk, job=job.pk)
    if method == "post":
        response = other_client.post(target, body or {})
    else:
        response = getattr(other_client, method)(target)
    assert response.status_code == 404
    after = (
        Session.objects.get(pk=session.pk).version,
        Message.objects.count(),
        list(Compaction.objects.values_list("number", "status")),
    )
    assert after == before


def test_another_owners_sessions_are_not_listed(
    api_client: JsonClient, other_user: Any, make_session: Any
) -> None:
    make_session(owner=other_user, messages=[])
    assert api_client.get("/api/sessions").json()["items"] == []
