"""The pages offer a revert (or Undo offload) exactly where the revert service allows one
(services/compacting/reverting.revert_refusal): never a button that ends in a 409 (issue 24 item
5)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from compaction import ScriptedSummarizer
from sessions_app.models import Compaction, Session
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import Conflict
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import assistant, exchange, system, user

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

BIG = "a long line of tool output\n" * 40


class _Undo(Exception):
    """Rolls a trial revert back."""


def _history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [system(), user("Start the refactor.")]
    for index in range(turns):
        messages += exchange(f"t{index}", "Read", {"file_path": f"src/m{index}.py"}, BIG)
        messages.append(assistant(f"Read module {index}."))
    return [*messages, user("Now finish."), assistant("Done.")]


def _offered(client: Client, session: Session) -> set[int]:
    """The numbers the compaction log offers to revert or undo."""
    html = _log_html(client, session)
    url = reverse("ui:revert", args=[session.pk, 0]).replace("/0/", "/(\\d+)/")
    return {int(n) for n in re.findall(f'hx-post="{url}"', html)}


def _allowed(session: Session) -> set[int]:
    """The numbers revert_compaction accepts now (each tried, then rolled back)."""
    allowed = set()
    for number in Compaction.objects.filter(session=session).values_list("number", flat=True):
        try:
            with transaction.atomic():
                revert_compaction(session, number)
                raise _Undo
        except _Undo:
            allowed.add(number)
        except Conflict:
            pass
    return allowed


def test_an_offload_a_newer_compaction_folded_offers_no_undo(logged_in: Client, user: Any) -> None:
    session = create_session(user, messages=_history(6))
    offload = offload_session(session, min_chars=100)
    assert offload.compaction == 1
    folded = compact_session(session, summarizer=ScriptedSummarizer(default="Summary."))
    assert folded.compaction is not None
    assert folded.compaction.number == 2
    assert _allowed(session) == {2}, "the service refuses #1 while #2 covers its entries"
    assert _offered(logged_in, session) == {2}
    assert 'data-undo-offload="1"' not in _log_html(logged_in, session)
    with pytest.raises(Conflict, match="revert #2 first"):
        revert_compaction(session, 1)
    revert_compaction(session, 2)
    assert _allowed(session) == _offered(logged_in, session) == {1}
    assert 'data-undo-offload="1"' in _log_html(logged_in, session)


def test_a_compaction_an_offload_overlaps_offers_no_revert(logged_in: Client, user: Any) -> None:
    session = create_session(user, messages=_history(6))
    folded = compact_session(session, summarizer=ScriptedSummarizer(default="Summary."))
    assert folded.compaction is not None
    first = folded.compaction
    assert first.first_position is not None
    assert first.last_position is not None
    # An offload's record whose range spans #1's (stored data: the engine's head is only the
    # system messages, so a real offload cannot reach before a marker): the service refuses
    # #1 until it is undone, and the marker in the history still draws at the top level.
    Compaction.objects.create(
        session=session,
        number=2,
        created_at=first.created_at,
        trigger=Compaction.Trigger.MANUAL,
        strategy=Compaction.Kind.OFFLOAD,
        first_position=max(first.first_position - 1, 0),
        last_position=first.last_position + 1,
    )
    with pytest.raises(Conflict, match="revert #2 first"):
        revert_compaction(session, 1)
    assert 1 not in _offered(logged_in, session)
    marker = logged_in.get(
        reverse("ui:compaction_summary", args=[session.pk, 1]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert reverse("ui:revert", args=[session.pk, 1]) not in marker


def test_the_page_offers_what_the_service_allows_in_nested_compactions(
    logged_in: Client, ui_session: Any
) -> None:
    session = ui_session.session
    assert _offered(logged_in, session) == _allowed(session) == {ui_session.outer.number}
    marker = logged_in.get(
        reverse("ui:compaction_summary", args=[session.pk, ui_session.outer.number]),
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert reverse("ui:revert", args=[session.pk, ui_session.outer.number]) in marker


def _log_html(client: Client, session: Session) -> str:
    response = client.get(reverse("ui:tab", args=[session.pk, "log"]), HTTP_HX_REQUEST="true")
    return response.content.decode()
