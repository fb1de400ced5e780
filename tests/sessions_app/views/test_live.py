"""The live pages: the session page's and the list's change polls (204 when unchanged, new
rows after an append, the history redrawn after a compaction), subagent links both ways,
and the agent's reported usage beside ctxweb's own count."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from django.db.models import F
from django.test import Client
from django.urls import reverse

from compaction import ScriptedSummarizer
from sessions_app.models import Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import append_messages, create_session
from sessions_app.viewmodels.blocks import usage_view
from tests.support.histories import assistant, exchange, tool_call, tool_results
from tests.support.histories import user as say

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

Get = Callable[..., Any]


def stamp_of(html: str, poller: str = "live-session") -> str:
    """The stamp a page's poller carries."""
    match = re.search(rf'id="{poller}"[^>]*data-stamp="([^"]+)"', html)
    assert match, f"no {poller} poller"
    return match.group(1)


def page_stamp(client: Client, session: Session) -> str:
    response = client.get(reverse("ui:session", args=[session.pk]))
    assert response.status_code == 200
    return stamp_of(response.content.decode())


def poll(get: Get, session: Session, since: str, tab: str = "history") -> Any:
    url = reverse("ui:session_changes", args=[session.pk])
    return get(f"{url}?since={since}&tab={tab}")


def test_the_page_carries_a_poller_that_pauses_with_the_tab(
    logged_in: Client, ui_session: UiSession
) -> None:
    html = logged_in.get(reverse("ui:session", args=[ui_session.session.pk])).content.decode()
    poller = re.search(r'<div id="live-session"[^>]*>', html)
    assert poller is not None
    tag = poller.group(0)
    assert "data-live" in tag
    assert "data-live-tabs" in tag
    assert 'hx-trigger="every 3s, live-poll"' in tag
    assert "js/live.js" in html
    assert "css/live.css" in html


def test_nothing_changed_is_204(
    logged_in: Client, htmx_get: Get, ui_session: UiSession, django_assert_max_num_queries: Any
) -> None:
    since = page_stamp(logged_in, ui_session.session)
    url = reverse("ui:session_changes", args=[ui_session.session.pk]) + f"?since={since}"
    htmx_get(url)  # the session's login lookups warm up
    with django_assert_max_num_queries(3):  # the user, the session row; the stamp is one
        response = htmx_get(url)
    assert response.status_code == 204
    assert response.content == b""


def test_an_append_sends_only_the_new_rows(
    logged_in: Client, htmx_get: Get, ui_session: UiSession
) -> None:
    session = ui_session.session
    since = page_stamp(logged_in, session)
    first = session.next_seq
    append_messages(session, [say("Live question?"), assistant("Live answer.")])
    response = poll(htmx_get, session, since)
    assert response.status_code == 200
    html = response.content.decode()
    appended = html.split('hx-swap-oob="beforeend:#history-items"', 1)[1]
    assert f'data-seq="{first}"' in appended
    assert f'data-seq="{first + 1}"' in appended
    assert "Live answer." in appended
    assert 'data-seq="0"' not in html  # the rows already shown are not sent again
    assert 'id="history" ' not in html  # no redraw of the whole history
    assert re.search(r'<section id="overview"[^>]*hx-swap-oob="true"', html)
    assert f"{first + 2} messages" in html  # the history's count, out of band too
    new_stamp = stamp_of(html)
    assert new_stamp != since
    assert poll(htmx_get, session, new_stamp).status_code == 204


def test_a_tool_result_redraws_the_call_it_answers(
    logged_in: Client, htmx_get: Get, user: Any
) -> None:
    session = create_session(user, title="Tools", messages=[say("Read it.")])
    append_messages(session, [tool_call("toolu_live", "Read", {"file_path": "a.py"})])
    since = page_stamp(logged_in, session)
    append_messages(session, [tool_results(("toolu_live", "print('hi')"))])
    html = poll(htmx_get, session, since).content.decode()
    redrawn = re.search(r'<article [^>]*data-seq="1"[^>]*hx-swap-oob="true"', html)
    assert redrawn is not None, html
    assert "print(&#x27;hi&#x27;)" in html
    assert "orphan-result" not in html


def test_a_compaction_redraws_the_history(
    logged_in: Client, htmx_get: Get, user: Any, ui: Any
) -> None:
    profile = ui.ui_profile()
    messages: list[dict[str, Any]] = []
    for index in range(8):
        messages += [say(f"Task {index}: " + "word " * 120), assistant(f"Done {index}.")]
    session = create_session(user, title="Grows", messages=messages, profile=profile)
    since = page_stamp(logged_in, session)
    outcome = compact_session(
        session, profile=profile, summarizer=ScriptedSummarizer(default="Live summary.")
    )
    assert outcome.compaction is not None, outcome.reason
    html = poll(htmx_get, session, since).content.decode()
    assert re.search(r'<div class="history" id="history" hx-swap-oob="true"', html)
    assert f'data-compaction="{outcome.compaction.number}"' in html
    assert "beforeend:#history-items" not in html


def test_another_tab_is_told_to_reload(
    logged_in: Client, htmx_get: Get, ui_session: UiSession
) -> None:
    session = ui_session.session
    since = page_stamp(logged_in, session)
    append_messages(session, [say("While the log is open.")])
    response = poll(htmx_get, session, since, tab="log")
    assert response.status_code == 200
    assert "session-changed" in response.headers["HX-Trigger-After-Settle"]
    html = response.content.decode()
    assert 'id="live-session"' in html
    assert "While the log is open." not in html


def test_a_bad_stamp_redraws_and_others_sessions_are_404(
    htmx_get: Get, ui_session: UiSession, other_user: Any
) -> None:
    session = ui_session.session
    html = poll(htmx_get, session, "not-a-stamp").content.decode()
    assert 'id="history" hx-swap-oob="true"' in html
    theirs = create_session(other_user, title="Theirs", messages=[say("secret")])
    assert poll(htmx_get, theirs, "1.0.1").status_code == 404
    anonymous = Client().get(reverse("ui:session_changes", args=[session.pk]))
    assert anonymous.status_code == 302


def test_the_list_poll(logged_in: Client, htmx_get: Get, ui_session: UiSession) -> None:
    html = logged_in.get("/").content.decode()
    since = stamp_of(html, "live-list")
    url = reverse("ui:list_changes") + f"?since={since}&q=&sort=recent"
    assert htmx_get(url).status_code == 204
    append_messages(ui_session.session, [say("The list sees this.")])
    response = htmx_get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert f'data-session="{ui_session.session.pk}"' in body
    assert stamp_of(body, "live-list") != since
    assert 'class="sessions-table"' in body


@pytest.fixture
def family(user: Any) -> tuple[Session, Session]:
    """A parent whose `Agent` tool call started a subagent session."""
    parent = create_session(
        user,
        title="Parent work",
        messages=[
            say("Explore the repo."),
            *exchange("toolu_agent_1", "Agent", {"description": "Find the parser"}, "found"),
        ],
    )
    child = create_session(
        user,
        title="Find the parser",
        messages=[say("Find the parser"), assistant("It is in src/parser.py.")],
        parent=parent,
        parent_tool_use_id="toolu_agent_1",
    )
    return parent, child


def test_subagent_links_both_ways(logged_in: Client, family: tuple[Session, Session]) -> None:
    parent, child = family
    html = logged_in.get(reverse("ui:session", args=[parent.pk])).content.decode()
    link = re.search(r'<a class="subagent-link" data-subagent="([^"]+)" href="([^"]+)"', html)
    assert link is not None
    assert link.group(1) == str(child.pk)
    assert link.group(2) == reverse("ui:session", args=[child.pk])
    assert f'class="child-link" data-subagent="{child.pk}"' in html
    html = logged_in.get(reverse("ui:session", args=[child.pk])).content.decode()
    assert f'class="parent-link" data-parent="{parent.pk}"' in html
    assert "Subagent of" in html


def test_the_list_groups_subagents_under_their_parent(
    logged_in: Client, family: tuple[Session, Session], user: Any
) -> None:
    parent, child = family
    create_session(user, title="Later unrelated", messages=[say("hi")])
    html = logged_in.get("/").content.decode()
    rows = re.findall(r'<tr data-session="([^"]+)"([^>]*)>', html)
    order = [pk for pk, _ in rows]
    assert order.index(str(child.pk)) == order.index(str(parent.pk)) + 1
    attributes = dict(rows)[str(child.pk)]
    assert f'data-parent="{parent.pk}"' in attributes
    assert "subagent-row" in attributes
    # A search lists matches flat; a subagent says whose it is.
    found = logged_in.get("/?q=parser").content.decode()
    assert f'data-session="{child.pk}"' in found
    assert "subagent of" in found


def test_reported_usage_beside_ctxwebs_count(logged_in: Client, user: Any) -> None:
    usage = {
        "input_tokens": 12,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 100,
        "output_tokens": 40,
    }
    session = create_session(
        user, title="Usage", messages=[say("Hi"), assistant("Hello!", usage=usage)]
    )
    Session.objects.filter(pk=session.pk).update(last_usage=usage)
    html = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    reported = re.search(
        r'<span class="reported-usage mono" data-input="(\d+)" data-output="(\d+)"', html
    )
    assert reported is not None
    assert reported.groups() == ("3112", "40")
    assert 'class="tok mono"' in html
    assert 'data-gauge-source="ctxweb"' in html
    assert 'data-reported-total="3152"' in html


def test_a_proxied_sessions_timeline_counts_its_system_prompt_and_tools(
    logged_in: Client, user: Any
) -> None:
    session = create_session(user, title="Proxied", messages=[say("Hi"), assistant("Yo")])
    plain = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert "data-chart-reserved" not in plain
    Session.objects.filter(pk=session.pk).update(
        proxy_state={"system_tokens": 1200, "tools_tokens": 3400}, version=F("version") + 1
    )

    html = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()

    assert 'data-chart-reserved="4600"' in html
    assert f"runtime {session.context_tokens + 4600} tokens" in html  # the chart's name


def test_without_reported_usage_the_gauge_says_so(logged_in: Client, user: Any) -> None:
    session = create_session(user, title="Plain", messages=[say("Hi"), assistant("Yo")])
    html = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert "reported-usage" not in html
    assert "No usage reported by the agent yet." in html


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {"input_tokens": 5, "cache_read_input_tokens": 10, "output_tokens": 2},
            (15, 2, 10),
        ),
        ({"prompt_tokens": 30, "completion_tokens": 4}, (30, 4, 0)),
        (
            {"input_tokens": 50, "cached_input_tokens": 20, "output_tokens": 5},
            (50, 5, 20),
        ),
        (
            {"input_tokens": 8, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 6}},
            (8, 1, 6),
        ),
    ],
)
def test_usage_views_of_every_format(usage: dict[str, Any], expected: tuple[int, ...]) -> None:
    view = usage_view(usage)
    assert view is not None
    assert (view.input_tokens, view.output_tokens, view.cached_tokens) == expected


@pytest.mark.parametrize("usage", [None, "x", {}, {"input_tokens": 0}, {"input_tokens": True}])
def test_no_usage_view_without_counts(usage: Any) -> None:
    assert usage_view(usage) is None
