"""The pages: login required, owner isolation, page vs partial, escaping, CSP-safe markup hooks."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Session
from sessions_app.templatetags.ctxweb_ui import tokens

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def session_urls(ui: UiSession) -> list[str]:
    """Every GET page or partial of one session."""
    pk = ui.session.pk
    n = ui.outer.number
    return [
        reverse("ui:session", args=[pk]),
        reverse("ui:overview", args=[pk]),
        *(reverse("ui:tab", args=[pk, tab]) for tab in ("history", "compare", "context", "log")),
        reverse("ui:history", args=[pk]),
        reverse("ui:message_range", args=[pk]) + "?first=0&last=3",
        reverse("ui:message", args=[pk, 14]),
        reverse("ui:tool_result", args=[pk, 15, "toolu_ui_1"]),
        reverse("ui:compaction_summary", args=[pk, n]),
        reverse("ui:compaction_originals", args=[pk, n]),
        reverse("ui:compaction_compare", args=[pk, n]),
        reverse("ui:compaction_lost", args=[pk, n]),
        reverse("ui:compaction_path", args=[pk, n]),
    ]


def post_urls(ui: UiSession) -> list[str]:
    pk = ui.session.pk
    return [
        reverse("ui:compact_preview", args=[pk]),
        reverse("ui:compact", args=[pk]),
        reverse("ui:offload", args=[pk]),
        reverse("ui:revert", args=[pk, ui.outer.number]),
    ]


def test_every_page_requires_login(ui_session: UiSession) -> None:
    anonymous = Client()
    for url in ["/", *session_urls(ui_session)]:
        response = anonymous.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url
    for url in [reverse("ui:import"), *post_urls(ui_session)]:
        response = anonymous.post(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url


def test_login_page_and_logging_in(user: Any) -> None:
    client = Client()
    page = client.get("/accounts/login/?next=/")
    assert page.status_code == 200
    assert b'name="password"' in page.content
    assert b'autocomplete="current-password"' in page.content
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-123", "next": "/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200
    failed = Client().post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert failed.status_code == 200
    assert b"notice-error" in failed.content


def test_another_owners_session_is_a_404(ui_session: UiSession, other_user: Any) -> None:
    intruder = Client()
    intruder.force_login(other_user)
    for url in session_urls(ui_session):
        assert intruder.get(url, HTTP_HX_REQUEST="true").status_code == 404, url
        assert intruder.get(url).status_code == 404, url
    for url in post_urls(ui_session):
        assert intruder.post(url).status_code == 404, url
    offloaded = reverse("ui:offloaded", args=[ui_session.session.pk, "tool-result-x.md"])
    assert intruder.get(offloaded).status_code == 404
    listing = intruder.get("/")
    assert ui_session.session.title.encode() not in listing.content


def test_list_shows_own_sessions_with_their_figures(
    ui_session: UiSession, logged_in: Client, make_session: Any, other_user: Any
) -> None:
    make_session(owner=other_user, title="Bob's secret session")
    response = logged_in.get("/")
    html = response.content.decode()
    assert "Parser refactor" in html
    assert "Bob&#x27;s secret session" not in html
    assert "Bob's secret session" not in html
    row = html[html.index(f'data-session="{ui_session.session.pk}"') :]
    assert 'class="usage-bar' in row
    assert 'class="usage-threshold"' in row
    assert "Anthropic" in html or "API" in html
    assert "<html" in html


def test_list_search_sort_and_partial(logged_in: Client, make_session: Any) -> None:
    make_session(title="alpha parser", messages=[])
    make_session(title="beta deploy", messages=[])
    found = logged_in.get("/?q=parser", HTTP_HX_REQUEST="true")
    assert found.status_code == 200
    assert b"alpha parser" in found.content
    assert b"beta deploy" not in found.content
    assert b"<html" not in found.content
    by_title = logged_in.get("/?sort=title", HTTP_HX_REQUEST="true").content.decode()
    assert by_title.index("alpha parser") < by_title.index("beta deploy")
    assert b"No session matches" in logged_in.get("/?q=nothing-like-this").content


def test_list_cursor_pagination_visits_every_session_once(logged_in: Client, user: Any) -> None:
    for index in range(30):
        Session.objects.create(owner=user, title=f"session {index:02d}", history_tokens=index % 3)
    seen: list[str] = []
    url = "/?sort=tokens"
    for _ in range(5):
        html = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
        seen += re.findall(r"session \d\d", html)
        match = re.search(r'rel="next" href="([^"]+)"', html)
        if not match:
            break
        url = "/" + match.group(1).replace("&amp;", "&")
    assert sorted(seen) == [f"session {i:02d}" for i in range(30)]
    assert logged_in.get("/?cursor=garbage!!").status_code == 200


def test_session_page_draws_gauge_timeline_and_top_level_markers(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    response = logged_in.get(reverse("ui:session", args=[ui_session.session.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    # Only the top-level compaction is drawn; #1 is nested inside it (loaded on demand).
    assert ui.compaction_numbers(html) == [ui_session.outer.number]
    marker = html[html.index(f'data-compaction="{ui_session.outer.number}"') :]
    first_line = marker[: marker.index("marker-buttons")]
    assert f"Compacted #{ui_session.outer.number}" in first_line
    assert "Manual" in first_line
    outer = ui_session.outer
    assert (
        f"{tokens(outer.tokens_before)} → {tokens(outer.tokens_after)}</span> tokens" in first_line
    )
    assert f"(\u2212{round(100 * (1 - outer.tokens_after / outer.tokens_before))}%)" in first_line
    assert f"{ui_session.outer.messages_before} → {ui_session.outer.messages_after}" in first_line
    assert "recall" in first_line
    assert 'class="gauge-grid"' in html
    assert html.count('class="cell') == 100
    assert "cell-threshold" in html
    assert 'class="timeline-chart"' in html
    assert 'class="runtime-line"' in html
    assert f'href="#compaction-{ui_session.inner.number}"' in html  # its drop on the chart
    assert 'role="tablist"' in html


@pytest.mark.parametrize("tab", ["history", "compare", "context", "log"])
def test_tab_partial_for_htmx_and_page_otherwise(
    ui_session: UiSession, logged_in: Client, tab: str
) -> None:
    url = reverse("ui:tab", args=[ui_session.session.pk, tab])
    partial = logged_in.get(url, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200
    assert b"<html" not in partial.content
    plain = logged_in.get(url)
    assert plain.status_code == 302
    assert plain["Location"].endswith(f"?tab={tab}")
    page = logged_in.get(plain["Location"])
    assert page.status_code == 200
    assert f'id="tab-{tab}" data-tab="{tab}" aria-controls="tab-panel"\n' in page.content.decode()
    assert 'aria-selected="true"' in page.content.decode()


def test_overview_partial_refreshes_on_session_changed(
    ui_session: UiSession, logged_in: Client
) -> None:
    url = reverse("ui:overview", args=[ui_session.session.pk])
    html = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in html
    assert 'hx-trigger="session-changed from:body"' in html
    assert logged_in.get(url)["Location"] == reverse("ui:session", args=[ui_session.session.pk])


def test_content_is_escaped_and_inert_everywhere(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    pk = ui_session.session.pk
    pages = [
        logged_in.get(reverse("ui:compaction_originals", args=[pk, ui_session.outer.number])),
        logged_in.get(reverse("ui:compaction_summary", args=[pk, ui_session.outer.number])),
        logged_in.get(reverse("ui:tab", args=[pk, "compare"]), HTTP_HX_REQUEST="true"),
        logged_in.get(reverse("ui:tab", args=[pk, "context"]), HTTP_HX_REQUEST="true"),
        logged_in.get(reverse("ui:compaction_compare", args=[pk, ui_session.outer.number])),
        logged_in.get(reverse("ui:tool_result", args=[pk, 15, "toolu_ui_1"])),
    ]
    for response in pages:
        html = response.content.decode()
        assert response.status_code == 200
        assert ui.HOSTILE_SCRIPT not in html
        assert ui.HOSTILE_IMG not in html
        assert "&lt;script&gt;" in html
        tags = ui.elements(html)
        assert not any(tag == "script" for tag, _ in tags)
        assert not any(tag == "img" for tag, _ in tags)
        assert not any(a.get("hx-get") == "/hx-attack/" for _, a in tags)
        assert not any(name.startswith("on") for _, a in tags for name in a)
    originals = pages[0].content.decode()
    assert "hx-disable" in originals
    assert 'data-compaction="1"' in originals


def test_page_markup_is_csp_safe(ui_session: UiSession, logged_in: Client, ui: Any) -> None:
    response = logged_in.get(reverse("ui:session", args=[ui_session.session.pk]))
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    tags = ui.elements(response.content)
    scripts = [attrs for tag, attrs in tags if tag == "script"]
    assert scripts
    assert all(attrs.get("src", "").startswith("/static/") for attrs in scripts)
    assert "/static/vendor/htmx-2.0.11.min.js" in [a["src"] for a in scripts]
    assert not any("style" in attrs for _, attrs in tags)
    assert not any(tag == "style" for tag, _ in tags)
    assert not any(name.startswith("on") for _, attrs in tags for name in attrs)
    body = next(attrs for tag, attrs in tags if tag == "body")
    assert re.fullmatch(r'\{"X-CSRFToken": "[A-Za-z0-9]+"\}', body["hx-headers"])
    config = next(a for t, a in tags if t == "meta" and a.get("name") == "htmx-config")
    assert '"allowEval": false' in config["content"]
    assert '"selfRequestsOnly": true' in config["content"]
    assert '"includeIndicatorStyles": false' in config["content"]


def test_every_expander_is_a_button_with_aria_expanded(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    pk = ui_session.session.pk
    fragments = [
        logged_in.get(reverse("ui:session", args=[pk])).content,
        logged_in.get(
            reverse("ui:compaction_originals", args=[pk, ui_session.outer.number])
        ).content,
        logged_in.get(
            reverse("ui:compaction_originals", args=[pk, ui_session.inner.number])
        ).content,
        logged_in.get(reverse("ui:tab", args=[pk, "compare"]), HTTP_HX_REQUEST="true").content,
        logged_in.get(reverse("ui:tab", args=[pk, "log"]), HTTP_HX_REQUEST="true").content,
    ]
    for html in fragments:
        ids = {attrs["id"] for _, attrs in ui.elements(html) if "id" in attrs}
        found = ui.expanders(html)
        assert found
        for attrs in found:
            assert attrs["aria-expanded"] == "false"
            assert attrs["type"] == "button"
            assert attrs["aria-controls"] in ids, attrs
        lazy = [a for a in found if "hx-get" in a]
        assert all(a["hx-trigger"] == "ctx-load" for a in lazy)
        assert all(a["hx-target"] == f"#{a['aria-controls']}" for a in lazy)
    marker_buttons = [a for a in ui.expanders(fragments[0]) if a["aria-controls"].startswith("c")]
    assert {a["aria-controls"] for a in marker_buttons} >= {
        f"c{ui_session.outer.number}-summary",
        f"c{ui_session.outer.number}-originals",
    }


def test_summary_partial_names_its_summarizer(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    url = reverse("ui:compaction_summary", args=[ui_session.session.pk, ui_session.inner.number])
    html = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert ui.FIRST_SUMMARY in html
    assert "scripted" in html
    assert "replaces messages #" in html


def test_an_empty_session_renders_every_tab(logged_in: Client, make_session: Any) -> None:
    session = make_session(title="nothing yet", messages=[])
    page = logged_in.get(reverse("ui:session", args=[session.pk]))
    assert page.status_code == 200
    assert b"No messages yet." in page.content
    for tab in ("history", "compare", "context", "log"):
        response = logged_in.get(reverse("ui:tab", args=[session.pk, tab]), HTTP_HX_REQUEST="true")
        assert response.status_code == 200, tab


def test_context_tab_is_exactly_the_api_body(
    ui_session: UiSession, logged_in: Client, api_client: Any
) -> None:
    pk = ui_session.session.pk
    for fmt in ("anthropic", "openai"):
        api = api_client.get(f"/api/sessions/{pk}/context?format={fmt}")
        assert api.status_code == 200
        download = logged_in.get(reverse("ui:context_download", args=[pk]) + f"?format={fmt}")
        assert download["Content-Type"] == "application/json"
        assert json.loads(download.content) == json.loads(api.content)
        tab = logged_in.get(
            reverse("ui:tab", args=[pk, "context"]) + f"?format={fmt}", HTTP_HX_REQUEST="true"
        ).content.decode()
        shown = tab[tab.index('id="context-json" hx-disable>') :].split(">", 1)[1]
        shown = shown[: shown.index("</pre>")]
        assert json.loads(unescape(shown)) == json.loads(api.content)
