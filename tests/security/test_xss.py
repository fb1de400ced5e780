"""XSS payloads sent through the API render inert in every page that shows them.

A session is created, appended to, compacted with a caller-written summary and
instructions, and imported, all carrying script payloads. Every page and partial of the
session is fetched: the payloads appear only escaped, no attribute or element from the
content becomes markup, and the pages forbid inline script through their CSP.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from .conftest import World

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "<img src=x onerror=\"alert('xss-img')\">"
SVG = "<svg/onload=alert('xss-svg')>"
QUOTE_BREAK = "\"><iframe srcdoc='xss-iframe'></iframe>"
JS_URL = "javascript:alert('xss-url')"
PAYLOADS = [SCRIPT, IMG, SVG, QUOTE_BREAK, JS_URL]
ALL = " ".join(PAYLOADS)


class MarkupFromContent(HTMLParser):
    """Collects the elements and attributes a payload would create if it were not escaped."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"iframe", "object", "embed"}:
            self.problems.append(f"<{tag}> element")
        if tag == "img" and ("src", "x") in attrs:
            self.problems.append("<img src=x> element")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"{name}= attribute on <{tag}>")
            if name in {"href", "src", "action"} and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.problems.append(f"javascript: URL in {name}")
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and "xss-" in data:
            self.problems.append("payload inside a <script> element")


def markup_problems(html: str) -> list[str]:
    parser = MarkupFromContent()
    parser.feed(html)
    parser.close()
    return parser.problems


def _hostile_messages(tool_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"please {ALL}"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"sure {ALL}"},
                {"type": "tool_use", "id": tool_id, "name": f"Bash{SVG}", "input": {"cmd": ALL}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": ALL * 20}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": f"done {ALL}"}]},
    ]


@pytest.fixture
def hostile(world: World) -> str:
    """A session full of payloads, compacted with a hostile summary; returns its id."""
    client = world.as_alice
    history = [m for i in range(8) for m in _hostile_messages(f"toolu_{i:04d}")]
    created = client.call(
        "POST",
        "/api/sessions",
        {"title": f"title {SCRIPT}{IMG}", "messages": history, "context_limit": 2000},
    )
    assert created.status_code == 201, created.content[:500]
    session_id = str(created.json()["id"])
    appended = client.call(
        "POST", f"/api/sessions/{session_id}/messages", {"messages": _hostile_messages("toolu_x")}
    )
    assert appended.status_code in (200, 201), appended.content[:500]
    compacted = client.call(
        "POST",
        f"/api/sessions/{session_id}/compactions",
        {"summary": f"summary {ALL}", "instructions": f"instructions {ALL}"},
    )
    assert compacted.status_code in (200, 201), compacted.content[:500]
    assert compacted.json()["compacted"], compacted.json()
    offloaded = client.call("POST", f"/api/sessions/{session_id}/offload", {"min_chars": 50})
    assert offloaded.status_code == 200
    return session_id


def _pages(session_id: str) -> list[str]:
    base = f"/sessions/{session_id}/"
    return [
        "/",
        base,
        f"{base}overview/",
        f"{base}tabs/history/",
        f"{base}tabs/context/",
        f"{base}tabs/context/?format=openai",
        f"{base}tabs/log/",
        f"{base}tabs/compare/",
        f"{base}history/",
        f"{base}messages/?first=0&last=40",
        f"{base}messages/0/",
        f"{base}messages/1/",
        f"{base}messages/2/tool-results/toolu_0000/",
        f"{base}compactions/1/summary/",
        f"{base}compactions/1/originals/",
        f"{base}compactions/1/compare/",
    ]


def test_payloads_render_escaped_in_every_page(world: World, hostile: str) -> None:
    browser = Client()
    browser.force_login(world.alice)
    escaped_seen = 0

    for url in _pages(hostile):
        # Partials answer HTMX requests (a plain GET of one redirects to its page).
        partial = url.count("/") > 3
        response = browser.get(url, headers={"HX-Request": "true"} if partial else {})
        assert response.status_code == 200, (url, response.status_code)
        html = response.content.decode()
        assert markup_problems(html) == [], url
        assert "<script>alert(" not in html, url
        escaped_seen += html.count("&lt;script&gt;alert(")

    assert escaped_seen > 0, "the payloads were shown (escaped) somewhere"


def test_the_markup_check_detects_unescaped_payloads() -> None:
    # The checker itself must be able to fail.
    assert markup_problems(f"<p>{IMG}{SVG}<a href='{JS_URL}'>x</a><script>{SCRIPT}</script></p>")
    assert markup_problems("<p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</p>") == []


def test_pages_forbid_inline_script(world: World, hostile: str) -> None:
    browser = Client()
    browser.force_login(world.alice)

    response = browser.get(f"/sessions/{hostile}/")

    policy = response["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", policy)
    assert script_src is not None
    assert "'unsafe-inline'" not in script_src.group(1)
    assert "'unsafe-eval'" not in script_src.group(1)
    assert response["X-Content-Type-Options"] == "nosniff"


def test_offloaded_content_is_served_as_plain_text(world: World, hostile: str) -> None:
    context = world.as_alice.get(f"/api/sessions/{hostile}/context").json()
    text = str(context["messages"])
    name = text.split("[Content offloaded to: ./", 1)[1].split("]", 1)[0]
    browser = Client()
    browser.force_login(world.alice)

    response = browser.get(f"/sessions/{hostile}/offloaded/{name}")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response["X-Content-Type-Options"] == "nosniff"


def test_api_json_carries_payloads_verbatim(world: World, hostile: str) -> None:
    # Escaping is the pages' job; the API returns exactly what was stored.
    body = world.as_alice.get(f"/api/sessions/{hostile}").json()

    assert body["title"] == f"title {SCRIPT}{IMG}"
